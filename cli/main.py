"""The `lakehouse` command: one entry point for the stack, the jobs and the tools."""

from __future__ import annotations

from importlib.metadata import entry_points

import typer

from cli import config, contract, load, query, run, sql, stack, trino
from cli.common import console
from lakehouse.errors import LakehouseError

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
app.add_typer(contract.app, name="contract")
app.add_typer(load.app, name="load")
app.command(name="query")(query.query)
app.command(name="sql")(sql.sql)
app.command(name="trino", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})(trino.trino)


def _add_plugins() -> None:
    """Commands other installed packages add: the harness's (`bench`, `chaos`, `demo`, `report`, from
    ``lab.commands``), declared in pyproject.toml under ``lakehouse.commands``.

    The image holds no ``lab/``: there the entry point names a module that is not installed and
    `lakehouse --help` lists only what can run. No module of this package imports the harness.
    """
    for plugin in entry_points(group="lakehouse.commands"):
        try:
            register = plugin.load()
        except ModuleNotFoundError as exc:
            if exc.name and (plugin.module + ".").startswith(exc.name + "."):
                continue  # its package is not installed here (the harness, in the image)
            raise
        register(app)


_add_plugins()


def main() -> None:
    """The `lakehouse` command: a problem the project explains is one line and exit code 1, not a traceback."""
    try:
        app()
    except LakehouseError as exc:
        console.print(f"[red]error:[/] {exc}")
        raise SystemExit(1) from None


if __name__ == "__main__":
    main()
