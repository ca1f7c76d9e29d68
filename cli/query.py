"""`lakehouse query`: the questions in queries/sql (or your own SQL) on DuckDB, Spark or Trino."""

from __future__ import annotations

from typing import Annotated

import typer

from cli.common import console, settings_or_exit


def query(
    name: Annotated[str | None, typer.Argument(help="A query from queries/sql (see --list).")] = None,
    sql: Annotated[str | None, typer.Option(
        "--sql", help="Your own Trino SQL, tables by name as in Trino: ods_behavior.clickevent, "
                      "iceberg.dim_db.products, a bare name with --schema, metadata tables as "
                      "ods_behavior.\"clickevent$snapshots\" ($files, $history, $partitions). The library's role "
                      "placeholders work too: {clicks}, {products}, {clicks:files}.")] = None,
    schema: Annotated[str | None, typer.Option(help="Schema for bare table names (as `USE schema`).")] = None,
    engine: Annotated[str, typer.Option(help="One of duckdb, spark, trino. DuckDB (default) reads the tables "
                                             "directly on the local stack; trino needs the Kubernetes runtime.")]
    = "duckdb",
    fmt: Annotated[str, typer.Option("--format", help="table, csv or json (one object per line).")] = "table",
    list_: Annotated[bool, typer.Option("--list", help="List the queries with their descriptions, then the "
                                                       "tables: each one's {role} placeholder, name and writer.")]
    = False,
    show_sql: Annotated[bool, typer.Option("--show-sql", help="Print the SQL the engine runs, then run it.")] = False,
) -> None:
    """Ask the lakehouse a question.

    Examples:\n
      lakehouse query --list\n
      lakehouse query top_products\n
      lakehouse query freshness --format json\n
      lakehouse query --sql "SELECT count(*) AS n FROM ods_behavior.clickevent"\n
      lakehouse query table_health --engine trino
    """
    from queries import library, output
    from queries.client import RemoteSession
    from queries.engines import ENGINES, open_session
    from queries.errors import EngineGap

    if list_:
        for q in library.all_queries():
            console.print(f"[bold]{q.name:<24}[/bold] {q.description}")
        console.print("\n[bold]tables[/bold] (as {role} in a query; `lakehouse run <writer>` writes them)")
        for t in settings_or_exit().tables:
            source = f", from the source table {t.source}" if t.source else ""
            console.print(f"  {{{t.role}}}".ljust(20) + f" {t.table:<36} writer {t.writer}, {t.upkeep}{source}")
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
    if engine == "trino":
        from cli.trino import ensure_local_trino

        ensure_local_trino(settings)
    if show_sql:
        console.print(library.render(chosen.template, settings), style="dim")
    try:
        with console.status(f"running {chosen.name} on {engine}..."):
            session = open_session(engine, settings, schema)
            if isinstance(session, RemoteSession):  # the stack's SQL service renders: no Arrow needed here
                rendered, outcome = session.execute_rendered(chosen.template, fmt)
            else:
                outcome = session.execute(chosen.template)
                rendered = None if outcome.table is None else output.render(outcome.table, fmt)
    except (EngineGap, KeyError, ValueError) as exc:
        console.print(f"[red]{chosen.name}: {exc.args[0] if exc.args else exc}[/red]")
        raise typer.Exit(2) from None
    if rendered is None:  # a statement without rows (USE): its message says what it did
        console.print(outcome.message)
        return
    output.show(rendered, console, title=f"{chosen.name}: {chosen.description}")
