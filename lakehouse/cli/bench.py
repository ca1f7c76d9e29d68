"""`lakehouse bench ...`: benchmarks that print their figures (never timed tests)."""

from __future__ import annotations

import time
from typing import Annotated

import typer
from rich.table import Table

from lakehouse.cli.common import console, friendly_errors, settings_or_exit
from lakehouse.settings import REPO_ROOT

app = typer.Typer(help="Benchmarks on the local stack; figures are printed and saved under results/.",
                  no_args_is_help=True)


@app.command()
def ingest(
    rate: Annotated[float, typer.Option(help="Events per second to produce.")] = 10_000,
    duration: Annotated[float, typer.Option(help="Seconds to produce for (the goal is stated for 600).")] = 60,
) -> None:
    """Sustained events/s and freshness p50/p95/p99 of the click pipeline, vs a Spark-less raw ceiling."""
    from pipeline.benchmark import run, save

    settings = settings_or_exit()
    out = REPO_ROOT / "results" / f"bench-ingest-{time.strftime('%Y%m%d-%H%M%S')}"
    out.mkdir(parents=True, exist_ok=True)
    with friendly_errors():
        result = run(settings, rate, duration, out, progress=console.log)
    table = Table(title=f"ingest benchmark: {rate:,.0f} events/s for {duration:.0f}s")
    table.add_column("figure")
    table.add_column("value", justify="right")
    for name, value in [
        ("events produced", f"{result.produced:,}"),
        ("events committed", f"{result.committed:,}"),
        ("sustained events/s", f"{result.sustained_eps:,.0f}"),
        ("freshness p50 (s)", f"{result.freshness_p50_s:.2f}"),
        ("freshness p95 (s)", f"{result.freshness_p95_s:.2f}"),
        ("freshness p99 (s)", f"{result.freshness_p99_s:.2f}"),
        ("micro-batches", f"{result.batches}"),
        ("mean batch duration (s)", f"{result.batch_mean_s:.2f}"),
        ("raw ceiling events/s (Kafka -> Parquet, no Spark)", f"{result.raw_ceiling_eps:,.0f}"),
        ("pipeline / raw ceiling", f"{result.ratio:.0%}"),
    ]:
        table.add_row(name, value)
    console.print(table)
    console.print(f"saved {save(result, out)}")
