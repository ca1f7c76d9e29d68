"""The `lakehouse` command: one entry point for the stack, the jobs and the tools."""

from __future__ import annotations

import typer

from lakehouse.cli import bench, config, run, stack

app = typer.Typer(
    help=(
        "Near-real-time lakehouse: Kafka -> PySpark -> Iceberg.\n\n"
        "Start with `lakehouse stack up`, then `lakehouse stack status`. Every setting can be overridden with "
        "LAKEHOUSE_<SECTION>__<FIELD> environment variables; `lakehouse config show` lists them."
    ),
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
)
app.add_typer(stack.app, name="stack")
app.add_typer(config.app, name="config")
app.add_typer(run.app, name="run")
app.add_typer(bench.app, name="bench")

if __name__ == "__main__":
    app()
