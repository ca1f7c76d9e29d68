"""Benchmarks of what an Iceberg commit costs the click table (the metastore's lock, each snapshot kept) and when a
new reader first sees it."""

from __future__ import annotations

from typing import Annotated

import typer

from cli.common import console, friendly_errors, print_figures, stack_settings_or_exit


def commit_lock(
    rows: Annotated[int, typer.Option(help="Rows per append (10,000 = a 1 s click batch at 10,000 events/s).")] = 10_000,
    rounds: Annotated[int, typer.Option(help="Timed appends per mode, after one warm-up each.")] = 20,
) -> None:
    """One Spark append's time with the Hive Metastore's commit lock and without it (HIVE-26882).

    The two modes alternate on two scratch tables, dropped afterwards. docs/spark-4.md records the
    figures and the decision they inform.
    """
    from lab.bench.commit_lock import measure

    settings = stack_settings_or_exit("s3", "metastore")
    with friendly_errors():
        results = measure(settings, rows, rounds, progress=console.log)
    print_figures(f"append of {rows:,} rows: append + commit, {rounds} rounds",
                  [(r.mode, f"median {r.median_s:.3f} s, p95 {r.p95_s:.3f} s (min {min(r.seconds):.3f}, "
                            f"max {max(r.seconds):.3f})") for r in results])


def snapshot_growth(
    rows: Annotated[int, typer.Option(help="Rows per append (2,500 = a 0.25 s click batch at 10,000 events/s).")] = 2_500,
    appends: Annotated[int, typer.Option(help="Appends in all: the snapshots the table ends with.")] = 3_000,
    every: Annotated[int, typer.Option(help="Appends between two readings.")] = 250,
) -> None:
    """What each snapshot the click table keeps costs: an append's time, the metadata file's size and a fresh
    reader's load, read every --every appends on a scratch copy of the click table (dropped afterwards).

    An hour of snapshots at a 1 s trigger is 3,600 of them; at 0.25 s, 14,400 (docs/performance.md).
    """
    from lab.bench.snapshot_growth import measure

    settings = stack_settings_or_exit("s3", "metastore")
    with friendly_errors():
        steps = measure(settings, rows, appends, every, progress=console.log)
    print_figures(f"appends of {rows:,} rows to a copy of the click table, as its snapshots pile up",
                  [(f"{s.snapshots:,} snapshots", f"append median {s.append_median_s:.3f} s, p95 {s.append_p95_s:.3f} s; "
                    f"metadata file {s.metadata_bytes / 1e6:.2f} MB; fresh load {s.load_s:.3f} s") for s in steps])


def visibility(
    seconds: Annotated[float, typer.Option(help="Seconds to watch the table for.")] = 120,
    interval: Annotated[float, typer.Option(help="Seconds between two fresh loads of the table.")] = 0.1,
    table: Annotated[str, typer.Option(help="The table to watch (default: the click table).")] = "",
) -> None:
    """How long after its commit a new reader first sees each snapshot: the table loaded afresh every
    INTERVAL, as Trino or DuckDB would load it, while its writer runs (start the writer first, e.g. `make
    demo` or `lakehouse run clicks` under load). The lag bounds a writer's freshness as readers see it:
    its freshness to the commit plus this."""
    from lab.bench.visibility import measure

    settings = stack_settings_or_exit("s3", "metastore")
    name = table or settings.catalog.clicks_table
    with friendly_errors():
        found = measure(settings, name, seconds, interval)
    print_figures(f"{name}: from a snapshot's commit to the first fresh load that sees it ({found.loads:,} loads)", [
        ("snapshots seen", f"{found.snapshots:,}"),
        ("lag p50 / p95 / p99 / max (s)",
         f"{found.lag_p50_s:.3f} / {found.lag_p95_s:.3f} / {found.lag_p99_s:.3f} / {found.lag_max_s:.3f}"),
        ("a fresh load of the table, median (s)", f"{found.load_median_s:.3f}"),
    ])
