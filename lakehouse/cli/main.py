"""The `lakehouse` command: one entry point for the stack, the jobs and the tools."""

from __future__ import annotations

from typing import Annotated

import typer

from lakehouse.cli import bench, config, load, query, run, stack

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
app.command(name="load")(load.load)
app.command(name="query")(query.query)



@app.command()
def demo(
    rate: Annotated[float, typer.Option(help="ClickEvents per second to produce.")] = 2000,
    duration: Annotated[float, typer.Option(help="Seconds to produce for.")] = 30,
    bad_share: Annotated[float, typer.Option(help="Share of deliberately bad events.")] = 0.01,
) -> None:
    """The main job on the local stack: ingest clicks end to end and summarise (stack must be up)."""
    from rich.table import Table

    from lakehouse.cli.common import console, friendly_errors, settings_or_exit
    from lakehouse.demo import run_demo

    settings = settings_or_exit()
    with friendly_errors():
        summary = run_demo(settings, rate, duration, bad_share, console)
    table = Table(title="demo summary")
    table.add_column("figure")
    table.add_column("value", justify="right")
    p50, p95, p99 = summary.freshness
    for name, value in [
        ("events produced", f"{summary.produced:,}"),
        ("events committed (valid + dead-lettered)", f"{summary.committed:,}"),
        ("rows in the click table (all runs)", f"{summary.valid_rows:,}"),
        ("rows in the dead-letter table (all runs)", f"{summary.dead_rows:,}"),
        ("freshness p50 / p95 / p99 (produce -> visible)", f"{p50:.1f}s / {p95:.1f}s / {p99:.1f}s"),
    ]:
        table.add_row(name, value)
    console.print(table)
    console.print(
        f"Prometheus: http://{settings.prometheus.address}/classic/graph (try lakehouse_kafka_lag_records)\n"
        f"Run more: `lakehouse run clicks` + `python -m loadgen.rate_producer --rate 5000 --duration 60`\n"
        "Stop the stack: `make down-local` (data kept; PURGE=1 to delete it)"
    )


if __name__ == "__main__":
    app()
