"""`lakehouse demo`: the whole story on the local stack, and its summary."""

from __future__ import annotations

from typing import Annotated

import typer

from cli.common import console, friendly_errors, settings_or_exit


def demo(
    rate: Annotated[float, typer.Option(help="ClickEvents per second Locust produces.")] = 2000,
    duration: Annotated[float, typer.Option(help="Seconds to produce for.")] = 60,
    bad_share: Annotated[float, typer.Option(help="Share of deliberately bad events.")] = 0.01,
    changes: Annotated[float, typer.Option(help="Changes per second Locust makes in the shop database (prices, "
                                                "member levels, new and removed rows).")] = 20,
    keep_running: Annotated[bool, typer.Option(
        help="Leave the stack up afterwards (to run `lakehouse query ...`); by default the demo stops what it "
             "started.")] = False,
) -> None:
    """The whole story on the local stack: CDC, ingestion, live aggregates, Locust load, a price change, results.

    Brings the local stack up if it is not running (and stops it again at the end unless
    --keep-running). Takes about two minutes plus start-up.
    """
    from rich.table import Table

    from deploy.local.stack import LocalStack
    from lab.demo import run_demo, trino_ending
    from lakehouse.errors import LakehouseError

    settings = settings_or_exit()
    stack = LocalStack(settings)
    with friendly_errors():
        with console.status("local stack: starting what is not running..."):
            started = stack.up()
        if started:
            console.log(f"local stack up: started {', '.join(started)}")
        settings = settings_or_exit()  # now with the stack's generated credentials
        trino_failure: LakehouseError | None = None
        try:
            summary = run_demo(settings, rate, duration, bad_share, console, changes)
            try:
                summary.trino_session, summary.trino_price = trino_ending(settings, console)
            except LakehouseError as exc:  # the figures are measured: print them first, then say what failed
                trino_failure = exc
        finally:
            if started and not keep_running:
                with console.status("stopping the local stack the demo started (data kept)..."):
                    stack.down()
    table = Table(title="demo summary")
    table.add_column("figure")
    table.add_column("value", justify="right")
    for name, value in [
        ("events produced", f"{summary.produced:,}"),
        ("events committed (valid + dead-lettered)", f"{summary.committed:,}"),
        ("rows in the click table (all runs)", f"{summary.valid_rows:,}"),
        ("rows in the dead-letter table (all runs)", f"{summary.dead_rows:,}"),
        ("click table schema changes", "; ".join(summary.schema_changes) or "none (had deviceType)"),
        ("Trino: seed session rows (use ods_behavior; select * from clickevent limit 100)",
         f"{len(summary.trino_session.rows)}" if summary.trino_session else "failed (below)"),
        ("Trino: product 1's price now", ", ".join(r[-1] for r in summary.trino_price.rows)
         if summary.trino_price else "-"),
    ] + [(f"freshness of the {f.name} p50 / p95 / p99 (goal p95 <= {f.goal_s:g} s)",
          f"{f.p50_s:.1f}s / {f.p95_s:.1f}s / {f.p99_s:.1f}s") for f in summary.freshness]:
        table.add_row(name, value)
    console.print(table)
    for f in summary.freshness:
        console.print(("[green]" if f.met else "[red]") + f.verdict() + ("[/green]" if f.met else "[/red]"))
    console.print("Freshness: from the event (Kafka produce, database commit) to the Iceberg commit that made it "
                  "visible. Standing figures: docs/benchmarks.md (`lakehouse bench system`).")
    if summary.committed < summary.produced:
        console.print(f"[red]only {summary.committed:,} of {summary.produced:,} produced events were committed[/red]: "
                      "see the job errors above (`lakehouse stack status`, `lakehouse stack logs kafka`)")
    up = not started or keep_running
    console.print(
        f"Locust report: {summary.report_dir / 'report.html'}\n"
        + (f"Prometheus: http://{settings.prometheus.address}/classic/graph (try lakehouse_kafka_lag_records)\n"
           "More questions: `lakehouse query --list`, then e.g. `lakehouse query table_health`\n"
           "Stop the stack: `make down-local` (data kept; PURGE=1 to delete it)" if up else
           "The stack was stopped. `make demo KEEP=1` leaves it up for `lakehouse query --list` and Prometheus.")
    )
    if trino_failure is not None:
        console.print(f"[red]error at the demo's Trino step:[/] {trino_failure}\n"
                      f"The figures above were measured before it. Trino's log: {settings.run_dir / 'logs' / 'trino.log'}. "
                      "To try the ending again: `make demo KEEP=1` leaves the stack up, then `lakehouse trino` and "
                      "`use ods_behavior; select * from clickevent limit 100;` (a JDK 24+ is needed: "
                      "LAKEHOUSE_TRINO__JAVA_HOME).")
    if summary.committed < summary.produced or trino_failure is not None:
        raise typer.Exit(1)
