"""`lakehouse bench peers`: this pipeline beside Spark Structured Streaming and the seed's Flink job, same run."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Annotated

import typer

from cli.common import console, friendly_errors, stack_settings_or_exit
from lakehouse.settings import results_path


def peers(
    rates: Annotated[str, typer.Option(help="Comma-separated rates (events/s); each system runs at each.")] = "10000",
    duration: Annotated[float, typer.Option(help="Seconds of load per system and rate.")] = 300,
    spark_triggers: Annotated[str, typer.Option(
        help="Spark Structured Streaming's processing-time triggers in seconds: 60 is the Iceberg guide's, "
             "the shortest it sustains on this machine is found by trying shorter ones (longest first; a shorter "
             "one only while the longer kept up).")] = "60,5,1,0.5",
    flink_checkpoints: Annotated[str, typer.Option(
        help="Seed 001's Flink job's checkpoint intervals in seconds (it commits once per checkpoint): 3 is the "
             "seed's; shorter ones find the shortest it sustains. Empty: no Flink. The first run installs "
             "Flink's own Python environment and jars (~1 min).")] = "3,1,0.5,0.25",
    pipeline: Annotated[bool, typer.Option(help="Also run this pipeline (its default settings).")] = True,
    pipeline_triggers: Annotated[str, typer.Option(
        help="Also run this pipeline at these micro-batch intervals in seconds (its default is "
             "pipeline.trigger_seconds, 1 s), to find its own best setting.")] = "0.5,0.25",
    arrow_triggers: Annotated[str, typer.Option(
        help="Also run the click job's work without Spark (lab/peers/clicks_arrow.py: read, parse, enrich and "
             "commit on one Python process) at these micro-batch intervals in seconds.")] = "",
    keep: Annotated[bool, typer.Option(help="Keep each run's topic and table (to look at them after).")] = False,
) -> None:
    """The same workload through each system, one after another on the local stack: freshness p50/p95/p99,
    sustained events/s, CPU per million events, files and snapshots per minute, exactly once; then each system
    at its best (its freshest setting that kept up) against the others' best.

    Each system's settings run longest first, a shorter one only while the longer kept up (every event
    committed once, in time, at >= 98 % of the produced rate).

    Long (every system at every rate, ``duration`` each plus warm-up): not part of `make bench`;
    `make bench-peers` runs it. docs/peers.md says how each peer is configured.
    """
    from rich.console import Console
    from rich.table import Table

    from lab.bench.peers import (
        best_line,
        best_of,
        clicks_arrow,
        flink,
        result_line,
        run,
        spark_structured_streaming,
        this_pipeline,
    )
    from lab.commands.bench_ingest import CLICK_STACK

    settings = stack_settings_or_exit(*CLICK_STACK)
    systems = ([this_pipeline()] if pipeline else []) + [
        this_pipeline(float(t)) for t in pipeline_triggers.split(",") if t.strip()] + [
        clicks_arrow(float(t)) for t in arrow_triggers.split(",") if t.strip()] + [
        spark_structured_streaming(float(t)) for t in spark_triggers.split(",") if t.strip()] + [
        flink(float(c)) for c in flink_checkpoints.split(",") if c.strip()]
    with friendly_errors():
        results = run(settings, systems, [float(r) for r in rates.split(",")], duration, progress=console.log, keep=keep)
    table = Table(title=f"peers: {duration:.0f}s of load each, same stack, same topic contents")
    lines = [result_line(r) for r in results]
    for column in lines[0]:
        table.add_column(column, justify="left" if column == "system" else "right")
    for line in lines:
        table.add_row(*line.values())
    # whole names and figures, in a log file too (print(width=) cannot widen a console past its own width)
    wide = Console(stderr=True, width=max(console.width, 190))
    wide.print(table)
    best = best_of(results)
    if best:
        ranked = Table(title="best against best: each system at its freshest setting that kept up, same rate, same run")
        rows = [best_line(r, best) for r in sorted(best, key=lambda r: (r.rate, r.p95_s))]
        for column in rows[0]:
            ranked.add_column(column, justify="left" if column in ("system", "its best setting") else "right")
        for row in rows:
            ranked.add_row(*row.values())
        wide.print(ranked)
    out = results_path("bench-peers")
    out.mkdir(parents=True, exist_ok=True)
    (out / "bench-peers.json").write_text(json.dumps([asdict(r) for r in results], indent=2))
    console.print(f"saved {out / 'bench-peers.json'}")
    if not all(r.sound for r in results):
        raise typer.Exit(1)
