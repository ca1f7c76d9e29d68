"""`lakehouse bench ingest`: the click pipeline's sustained rate and freshness, beside a Spark-less ceiling."""

from __future__ import annotations

import time
from typing import Annotated

import typer

from cli.common import console, friendly_errors, print_figures, stack_settings_or_exit
from lab.commands.common import record_figures, run_report
from lakehouse.settings import results_path

#: what the click benchmarks read and write: topics, tables, the catalog
CLICK_STACK = ("kafka", "s3", "metastore", "mariadb")  # the click job sizes its dimensions in the source


def ingest(
    rate: Annotated[float, typer.Option(help="Events per second to produce.")] = 10_000,
    duration: Annotated[float, typer.Option(help="Seconds to produce for (the goal is stated for 600).")] = 60,
    record: Annotated[bool, typer.Option(help="Also append the figures as dated rows to docs/benchmarks.md.")] = False,
    keep: Annotated[bool, typer.Option(help="Keep the run's own topic(s), tables (and database) afterwards, to look "
                                            "at them; by default they are removed once the figures are read.")] = False,
    keys: Annotated[str, typer.Option(
        help="Draw uid and productId from dimensions loaded with `lakehouse load dims`: members=N,products=M"
             "[,skew=S,unknown=U] (Zipf skew over products; a tenth unknown by default). Empty: the seed's keys.")]
        = "",
    profile: Annotated[bool, typer.Option(
        help="Also print where a batch's time goes, from the job's own metrics: planning, the standing tasks' "
             "work (fetch, transform, write Parquet, summed over the tasks), the commit; and the pipeline's CPU by "
             "process. Set the trigger with LAKEHOUSE_PIPELINE__TRIGGER_SECONDS.")]
        = False,
) -> None:
    """Sustained events/s and freshness p50/p95/p99 of the click pipeline, vs a Spark-less raw ceiling.

    With --keys against real-size dimensions (issue 41), also the peak memory of the driver, the JVM and the
    Python workers. Example: lakehouse load dims --members 10000000 --products 1000000, then
    lakehouse bench ingest --rate 10000 --duration 300 --keys members=10000000,products=1000000,skew=1.1
    """
    from lab.bench.ingest import run, save
    from pipeline.metrics import serve

    settings = stack_settings_or_exit(*CLICK_STACK)
    out = results_path("bench-ingest")
    out.mkdir(parents=True, exist_ok=True)
    began = time.monotonic()
    with friendly_errors():
        serve(settings.metrics.host, settings.metrics.pipeline_port)  # so Prometheus sees the run
        if keys:
            from loadgen.dimensions import check_loaded
            from loadgen.key_space import KeySpace

            check_loaded(settings, KeySpace.parse(keys))
        result = run(settings, rate, duration, out, progress=console.log, keep=keep, keys=keys, profile=profile)
    print_figures(f"ingest benchmark: {rate:,.0f} events/s for {duration:.0f}s", [
        ("events produced", f"{result.produced:,}"),
        ("events committed", f"{result.committed:,}"),
        ("lag left when the load stopped (s to drain)", f"{result.drain_s:.1f}"),
        ("sustained events/s", f"{result.sustained_eps:,.0f}"),
        ("freshness p50 (s)", f"{result.freshness_p50_s:.2f}"),
        ("freshness p95 (s)", f"{result.freshness_p95_s:.2f}"),
        ("freshness p99 (s)", f"{result.freshness_p99_s:.2f}"),
        ("micro-batches", f"{result.batches}"),
        ("mean batch duration (s)", f"{result.batch_mean_s:.2f}"),
        ("raw ceiling events/s (Kafka -> Parquet, no Spark)", f"{result.raw_ceiling_eps:,.0f}"),
        ("pipeline / raw ceiling", f"{result.ratio:.0%}"),
        *((f"CPU s per million events: {part}", f"{seconds:,.1f}") for part, seconds in result.cpu_per_million.items()),
        *((f"peak memory (MiB): {part}", f"{mib:,.0f}") for part, mib in result.peak_rss_mb.items()),
    ])
    if result.breakdown is not None:
        print_figures("where a batch's time goes (mean s a batch; the tasks' parts summed over its tasks)", [
            (part, f"{seconds:.3f}") for part, seconds in result.breakdown.items()])
    console.print(f"saved {save(result, out)}")
    if record:
        from lab.bench.record import ingest_figures

        record_figures(ingest_figures(result, f"bench ingest --rate {rate:.0f} --duration {duration:.0f}"))
    run_report(settings, out, time.monotonic() - began)
