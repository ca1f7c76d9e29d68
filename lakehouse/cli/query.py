"""`lakehouse query`: the questions in queries/sql (or your own SQL) on DuckDB, Spark or Trino."""

from __future__ import annotations

from typing import Annotated

import typer

from lakehouse.cli.common import console, settings_or_exit

ENGINES = ("duckdb", "spark", "trino")


def query(
    name: Annotated[str | None, typer.Argument(help="A query from queries/sql (see --list).")] = None,
    sql: Annotated[str | None, typer.Option(
        "--sql", help="Your own Trino SQL. Name tables by role: {clicks}, {dead_letter}, {products}, {members}, "
                      "{product_views}, {member_activity}, {daily_users}; metadata: {clicks:snapshots}, "
                      "{clicks:files}.")] = None,
    engine: Annotated[str, typer.Option(help=f"One of {', '.join(ENGINES)}. DuckDB (default) reads the tables "
                                             "directly on the local stack; trino needs the Kubernetes runtime.")]
    = "duckdb",
    fmt: Annotated[str, typer.Option("--format", help="table, csv or json (one object per line).")] = "table",
    list_: Annotated[bool, typer.Option("--list", help="List the queries with their descriptions.")] = False,
    show_sql: Annotated[bool, typer.Option("--show-sql", help="Print the SQL the engine runs, then run it.")] = False,
) -> None:
    """Ask the lakehouse a question.

    Examples:\n
      lakehouse query --list\n
      lakehouse query top_products\n
      lakehouse query freshness --format json\n
      lakehouse query --sql "SELECT count(*) AS n FROM {clicks}"\n
      lakehouse query table_health --engine trino
    """
    from queries import library, output
    from queries.dialects import EngineGap

    if list_:
        for q in library.all_queries():
            console.print(f"[bold]{q.name:<24}[/bold] {q.description}")
        return
    if (name is None) == (sql is None):
        raise typer.BadParameter("give a query NAME or --sql, not both (see --list)")
    if engine not in ENGINES:
        raise typer.BadParameter(f"unknown engine {engine!r}; choose one of {', '.join(ENGINES)}", param_hint="--engine")
    if fmt not in output.FORMATS:
        raise typer.BadParameter(f"unknown format {fmt!r}; choose one of {', '.join(output.FORMATS)}",
                                 param_hint="--format")
    try:
        chosen = library.load(name) if name else library.Query("sql", "ad-hoc SQL", sql)
    except KeyError as exc:
        raise typer.BadParameter(str(exc.args[0]), param_hint="NAME") from None
    settings = settings_or_exit()
    if show_sql:
        rendered, _ = library.render(chosen.template, settings, lambda ref: library.trino_name(settings, ref))
        console.print(rendered, style="dim")
    try:
        with console.status(f"running {chosen.name} on {engine}..."):
            result = _engine(engine, settings).run(chosen.template)
    except (EngineGap, KeyError, ValueError) as exc:
        console.print(f"[red]{chosen.name}: {exc.args[0] if exc.args else exc}[/red]")
        raise typer.Exit(2) from None
    output.write(result, fmt, console, title=f"{chosen.name}: {chosen.description}")


def _engine(name: str, settings):
    if name == "duckdb":
        from queries.duckdb_engine import DuckDBEngine

        return DuckDBEngine(settings)
    if name == "spark":
        from queries.spark_engine import SparkEngine

        return SparkEngine(settings)
    from queries.trino_engine import TrinoEngine

    return TrinoEngine(settings)
