"""`lakehouse chaos`: the fault-injection suite, on a local stack of its own."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from cli.common import console, friendly_errors, settings_or_exit
from lakehouse.settings import REPO_ROOT, results_path


def _interrupt(_signum, _frame) -> None:
    raise KeyboardInterrupt


def chaos(
    faults: Annotated[str, typer.Option(
        help="Comma-separated fault keys, run in order; 'all' for every one, 'ci' for the CI-sized subset. "
             "Keys: kill:{clicks,dims,aggregates,cdc,maintenance}, restart:{kafka,s3,metastore,postgres,mariadb}, "
             "outage:{s3,metastore}, disk-full, clock.")] = "all",
    rate: Annotated[float, typer.Option(help="Click events per second, steady, during the whole run.")] = 200,
    change_rate: Annotated[float, typer.Option(help="Source-database changes per second.")] = 4,
    outage: Annotated[float, typer.Option(help="Seconds an outage (and the full disk) lasts.")] = 30,
    settle: Annotated[float, typer.Option(help="Seconds of calm after each recovery, before the next fault.")] = 10,
    recovery_timeout: Annotated[float, typer.Option(help="Seconds a fault may take to recover before it "
                                                         "counts as not recovered.")] = 300,
    disk_mb: Annotated[int, typer.Option(help="Size of the suite's tmpfs run directory (as root).")] = 4096,
    out: Annotated[Path | None, typer.Option(help="Where chaos.csv and the process logs go "
                                                  "(default results/chaos-<time>).")] = None,
) -> None:
    """Break the system one fault at a time under steady load; prove it loses and duplicates nothing.

    Starts a local stack of its own (ports +200, run directory .run-chaos on a bounded tmpfs when run as root),
    runs every pipeline process (`lakehouse run clicks | dims | aggregate | cdc | maintain`) under a supervisor
    that restarts what exits, produces click events and database changes, and injects the faults in order. After
    each it measures the time until everything produced before the fault's end is committed and a heartbeat change
    in MariaDB is visible in Iceberg. At the end it checks every acknowledged event is in the click table exactly
    once (by eventId), the Iceberg dimensions equal MariaDB, the live aggregates equal the click table and
    skewed-clock events were dead-lettered. Prints the table and writes results/chaos-*/chaos.csv; exits 1 when
    any row lost or duplicated events or did not recover.

    Examples: `lakehouse chaos --faults ci` (about 5 minutes on 2 cores), `lakehouse chaos --faults kill:pipeline,outage:s3`.
    """
    from lab.chaos.faults import CI_SUBSET, catalog
    from lab.chaos.suite import chaos_stack, run_chaos

    known = catalog()
    keys = list(known) if faults == "all" else list(CI_SUBSET) if faults == "ci" else \
        [k.strip() for k in faults.split(",") if k.strip()]
    unknown = [k for k in keys if k not in known]
    if unknown:
        raise typer.BadParameter(f"unknown fault {', '.join(unknown)}; choose from: all, ci, {', '.join(known)}",
                                 param_hint="--faults")
    settings_or_exit()
    signal.signal(signal.SIGTERM, _interrupt)  # a stopped run still stops its stack and processes
    out = out or results_path("chaos")
    out.mkdir(parents=True, exist_ok=True)
    with friendly_errors(), chaos_stack(REPO_ROOT / ".run-chaos", disk_mb, progress=console.log) as (s, env, stack):
        report = run_chaos(s, env, stack, [known[k] for k in keys], out, rate, change_rate, outage, settle,
                           recovery_timeout, progress=console.log)
    table = Table(title=f"chaos: {len(keys)} faults, {rate:,.0f} events/s + {change_rate:g} changes/s")
    for column in ("fault", "recovery (s)", "events lost", "events duplicated", "crashes", "note"):
        table.add_column(column, justify="left" if column in ("fault", "note") else "right")
    for row in report.rows:
        recovered = f"{row.recovery_s:.1f}" if row.recovery_s is not None else "[red]no[/]"
        table.add_row(row.fault, recovered, str(row.lost), str(row.duplicated), str(row.crashes), row.note)
    console.print(table, width=max(console.width, 150))
    console.print(f"acknowledged events {report.acknowledged:,}, rows committed {report.committed:,} "
                  f"(+{report.unacknowledged_landed} whose acknowledgement was lost); database changes "
                  f"{report.changes_made:,}, dimensions equal to MariaDB: {report.dims_equal}; live aggregates "
                  f"equal: {not report.aggregate_gaps}; skewed-clock events dead-lettered "
                  f"{report.skewed_dead_lettered}/{report.skewed}")
    console.print(f"rows: {out / 'chaos.csv'}, process logs: {out / 'logs'}")
    for failure in report.failures:
        console.print(f"[red]failed:[/] {failure}")
    if report.failures:
        raise typer.Exit(1)
