"""`lakehouse bench ...`: benchmarks that print their figures (never timed tests)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from lakehouse.cli.common import console, friendly_errors, stack_settings_or_exit
from lakehouse.soak_compare import FRESHNESS_TOLERANCE

#: what the click benchmarks read and write: topics, tables, the catalog
CLICK_STACK = ("kafka", "s3", "metastore")
from lakehouse.settings import REPO_ROOT

def _report(settings, out, seconds: float) -> None:
    """Plots of the run from Prometheus beside the figures (skipped, saying why, if Prometheus is down)."""
    from lakehouse.report import PrometheusError, write_report

    try:
        console.print(f"report with plots: {write_report(settings, out / 'report', seconds + 60)}")
    except PrometheusError as exc:
        console.print(f"no report: {exc}")


def _print_figures(title: str, figures: list[tuple[str, str]]) -> None:
    table = Table(title=title)
    table.add_column("figure")
    table.add_column("value", justify="right")
    for name, value in figures:
        table.add_row(name, value)
    console.print(table)


app = typer.Typer(help="Benchmarks on the local stack; figures are printed and saved under results/.",
                  no_args_is_help=True)


@app.command()
def ingest(
    rate: Annotated[float, typer.Option(help="Events per second to produce.")] = 10_000,
    duration: Annotated[float, typer.Option(help="Seconds to produce for (the goal is stated for 600).")] = 60,
) -> None:
    """Sustained events/s and freshness p50/p95/p99 of the click pipeline, vs a Spark-less raw ceiling."""
    from pipeline.benchmark import run, save
    from pipeline.metrics import serve

    settings = stack_settings_or_exit(*CLICK_STACK)
    out = REPO_ROOT / "results" / f"bench-ingest-{time.strftime('%Y%m%d-%H%M%S')}"
    out.mkdir(parents=True, exist_ok=True)
    began = time.monotonic()
    with friendly_errors():
        serve(settings.metrics.host, settings.metrics.pipeline_port)  # so Prometheus sees the run
        result = run(settings, rate, duration, out, progress=console.log)
    _print_figures(f"ingest benchmark: {rate:,.0f} events/s for {duration:.0f}s", [
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
    ])
    console.print(f"saved {save(result, out)}")
    _report(settings, out, time.monotonic() - began)


@app.command()
def batch(
    events: Annotated[int, typer.Option(help="Events in the batch (20,000 = 2 s at 10,000 events/s).")] = 20_000,
    rounds: Annotated[int, typer.Option(help="Timed rounds per phase, after one warm-up round.")] = 5,
) -> None:
    """Where one click micro-batch spends its time: plan, read (fetch + validate + enrich), and the whole batch.

    Profile this before changing the hot path, and again after: the medians are the figures
    docs/performance.md quotes.
    """
    from pipeline.batch_profile import profile

    settings = stack_settings_or_exit(*CLICK_STACK)
    with friendly_errors():
        phases = profile(settings, events, rounds, progress=console.log)
    _print_figures(f"one batch of {events:,} events, medians of {rounds} rounds (min - max)",
                   [(p.phase, f"{p.median_s:.3f} s ({p.min_s:.3f} - {p.max_s:.3f})") for p in phases])


@app.command()
def standard(
    ingest_seconds: Annotated[float, typer.Option(help="Seconds of the 10,000 events/s ingest run.")] = 180,
    cdc_seconds: Annotated[float, typer.Option(help="Seconds of the 1,000 changes/s CDC run.")] = 90,
    record: Annotated[bool, typer.Option(help="Append the figures to docs/benchmarks.md (--no-record: print "
                                              "only).")] = True,
) -> None:
    """The standard set (`make bench`): ingest at 10,000 events/s and CDC at 1,000 changes/s, each figure
    printed against its goal and appended as a dated row to docs/benchmarks.md (JSON under results/)."""
    from lakehouse.bench_record import BENCHMARKS_MD, append_rows, run_standard
    from pipeline.metrics import serve

    settings = stack_settings_or_exit(*CLICK_STACK, "mariadb")
    out = REPO_ROOT / "results" / f"bench-standard-{time.strftime('%Y%m%d-%H%M%S')}"
    out.mkdir(parents=True, exist_ok=True)
    with friendly_errors():
        serve(settings.metrics.host, settings.metrics.pipeline_port)
        figures = run_standard(settings, out, ingest_seconds, cdc_seconds, progress=console.log)
    table = Table(title="standard benchmarks")
    for column in ("benchmark", "figure", "value", "goal", "met"):
        table.add_column(column)
    for f in figures:
        table.add_row(*f.cells())
    console.print(table)
    if record:
        append_rows(figures)
        console.print(f"appended {len(figures)} rows to {BENCHMARKS_MD.relative_to(REPO_ROOT)}; JSON in {out}")


@app.command()
def load(
    rates: Annotated[str, typer.Option(help="Comma-separated target rates to try.")] = "10000,20000,40000,80000",
    workers: Annotated[str, typer.Option(help="Comma-separated worker counts to try.")] = "1,2",
    seconds: Annotated[float, typer.Option(help="Seconds per trial.")] = 10,
) -> None:
    """Highest events/s Locust sustains against the local broker, per process count, with produce latency."""
    from loadgen.run import run

    settings = stack_settings_or_exit("kafka", "s3")
    out = REPO_ROOT / "results" / f"bench-load-{time.strftime('%Y%m%d-%H%M%S')}"
    began = time.monotonic()
    table = Table(title=f"load generator capacity ({seconds:.0f}s trials)")
    for col in ("workers", "target/s", "achieved/s", "reached", "p50 ms", "p99 ms"):
        table.add_column(col, justify="right")
    with friendly_errors():
        for n in [int(w) for w in workers.split(",")]:
            for rate in [float(r) for r in rates.split(",")]:
                console.log(f"{n} process(es) at {rate:,.0f}/s ...")
                # Its own topic: millions of benchmark events must not land in the pipeline's backlog.
                result = run(rate, seconds, "constant", 0.0, max(4, 2 * n), n, 0.0, out / f"w{n}-r{int(rate)}",
                             topic=f"bench_load_{out.name[-15:]}")
                table.add_row(str(n), f"{rate:,.0f}", f"{result.achieved_rate:,.0f}",
                              "yes" if result.reached else "no", f"{result.produce_p50_ms:.0f}",
                              f"{result.produce_p99_ms:.0f}")
                if not result.reached:
                    break
    console.print(table)
    console.print(f"reports under {out}")
    _report(settings, out, time.monotonic() - began)


@app.command()
def cdc(
    rate: Annotated[float, typer.Option(help="Database changes per second.")] = 1000,
    duration: Annotated[float, typer.Option(help="Seconds to write for.")] = 60,
) -> None:
    """Sustained changes/s and apply freshness p50/p95 (database commit -> visible in Iceberg)."""
    from pipeline.cdc.benchmark import run
    from pipeline.metrics import serve

    settings = stack_settings_or_exit(*CLICK_STACK, "mariadb")
    began = time.monotonic()
    with friendly_errors():
        serve(settings.metrics.host, settings.metrics.pipeline_port)  # so Prometheus sees the run
        result = run(settings, rate, duration, progress=console.log)
    _print_figures(f"CDC benchmark: {rate:,.0f} changes/s for {duration:.0f}s", [
        ("changes written", f"{result.changes:,}"),
        ("sustained changes/s (applied while the load ran)", f"{result.sustained_cps:,.0f}"),
        ("until the last change was applied (s)", f"{result.applied_s:.1f}"),
        ("apply freshness p50 (s)", f"{result.freshness_p50_s:.2f}"),
        ("apply freshness p95 (s)", f"{result.freshness_p95_s:.2f}"),
    ])
    _report(settings, REPO_ROOT / "results" / f"bench-cdc-{time.strftime('%Y%m%d-%H%M%S')}",
            time.monotonic() - began)


@app.command()
def broker(messages: Annotated[int, typer.Option(help="Messages per engine (about 200 bytes each).")] = 200_000) -> None:
    """Produce/consume msg/s of the local broker: the stack's engine (memory unless kafka.storage=s3) vs a
    temporary memory-engine broker."""
    from deploy.local.broker_benchmark import compare

    with friendly_errors():
        figures = compare(stack_settings_or_exit("kafka", "s3"), messages)
    _print_figures(f"local broker, {messages:,} messages of ~200 bytes, batched producer",
                   [(f"{f.engine}: produce / consume msg/s", f"{f.produce_per_s:,.0f} / {f.consume_per_s:,.0f}")
                    for f in figures])


@app.command("broker-growth")
def broker_growth(
    batches: Annotated[int, typer.Option(help="Producer batches to store in the end (10 records each).")] = 8000,
) -> None:
    """Seconds for a fetch at a partition's tail as it stores more producer batches (the stack's broker)."""
    from deploy.local.broker_benchmark import fetch_cost_by_size

    steps = tuple(n for n in (500, 1000, 2000, 4000, 8000, 16000, 32000) if n < batches) + (batches,)
    settings = stack_settings_or_exit("kafka", "s3")
    with friendly_errors():
        figures = fetch_cost_by_size(settings.kafka.bootstrap, steps, progress=console.log)
    _print_figures(f"tail fetch on the stack's broker ({settings.kafka.storage} engine) by batches stored",
                   [(f"{f.batches:,} batches", f"{f.fetch_s:.2f} s") for f in figures])


@app.command()
def soak(
    rate: Annotated[float, typer.Option(help="ClickEvents per second, steady.")] = 2000,
    duration: Annotated[str, typer.Option(help="How long: 600, 10m, 1h, 1h30m.")] = "1h",
    every: Annotated[str, typer.Option(help="Sampling interval: 60s, 5m.")] = "3m",
    drift: Annotated[float, typer.Option(
        help="Allowed drift of the soak queries' CPU time (the reader's own work, not the wait for cores the "
             "writer shares), first hour of the samples under load to the last (thirds of a run under two hours; "
             "0.10 = 10 %).")] = 0.10,
    maintenance: Annotated[bool, typer.Option(help="Run the maintenance service (--no-maintenance: the baseline "
                                                   "to compare freshness and file counts with).")] = True,
    pair: Annotated[bool, typer.Option(
        help="Then run the same load again without maintenance (the baseline) and judge 'freshness p95 "
             "unchanged by maintenance': the median of the windows' p95 from one snapshot retention in (at most "
             "half the run) within --freshness-tolerance of the baseline's. Twice the time.")] = False,
    freshness_tolerance: Annotated[float, typer.Option(
        help="With --pair: how much later data may arrive with maintenance (0.10 = 10 %).")] = FRESHNESS_TOLERANCE,
    broker: Annotated[str, typer.Option(help="'private': a memory-engine broker of the soak's own (default; the "
                                             "stack's S3-engine broker slows down over long runs); 'stack': the "
                                             "stack's broker.")] = "private",
) -> None:
    """Hours of steady load with maintenance on: do files, metadata, query latency and freshness stay flat?

    Samples every EVERY: live data files in the fullest day-partition, delete files,
    snapshots, manifest bytes, the soak queries' latency on DuckDB, freshness p95. At the
    end checks every produced event is in the table exactly once. Writes soak.csv and
    soak.png under results/; exits 1 when a goal is missed.

    Maintenance runs as `lakehouse run maintain` in a process of its own, at
    LAKEHOUSE_MAINTENANCE__NICE (its log: maintenance.log beside the results).
    With --pair the baseline follows on a broker of its own and freshness-pair.png
    shows both runs' freshness.
    """
    from loadgen.run import parse_duration
    from lakehouse.soak_compare import compare_freshness, steady_start_s

    settings = stack_settings_or_exit("s3", "metastore", *(("kafka",) if broker == "stack" else ()))
    try:
        seconds, interval = parse_duration(duration), parse_duration(every)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None
    if pair and not maintenance:
        raise typer.BadParameter("--pair runs the baseline itself after the run with maintenance: drop --no-maintenance")
    results = [_soak_once(settings, rate, seconds, interval, drift, maintenance, broker)]
    if pair:
        results.append(_soak_once(settings, rate, seconds, interval, drift, False, broker))
    failures = [f for r in results for f in r.failures]
    if pair:
        verdict = compare_freshness(results[0].samples, results[1].samples,
                                    steady_start_s(settings.maintenance.snapshot_retention_minutes, seconds),
                                    freshness_tolerance)
        _judge_pair(results[0].samples, results[1].samples, verdict, results[0].out_dir / "freshness-pair.png")
        if not verdict.met:
            failures.append(f"freshness changed by maintenance: {verdict.describe()}")
    for failure in failures:
        console.print(f"[red]goal missed:[/] {failure}")
    if failures:
        raise typer.Exit(1)


def _soak_once(settings, rate: float, seconds: float, interval: float, drift: float, maintenance: bool, broker: str):
    """One soak on a broker of its own (or the stack's), its figures printed and its report written."""
    from contextlib import nullcontext

    from lakehouse.soak import MAX_FILES_PER_PARTITION, run_soak
    from lakehouse.soak_services import private_broker
    from pipeline.metrics import serve

    out = REPO_ROOT / "results" / f"soak-{time.strftime('%Y%m%d-%H%M%S')}"
    began = time.monotonic()
    with friendly_errors():
        serve(settings.metrics.host, settings.metrics.pipeline_port)
        out.mkdir(parents=True, exist_ok=True)
        with private_broker(settings, out / "broker.log") if broker == "private" else nullcontext(settings) as s:
            result = run_soak(s, rate, seconds, interval, out, drift, progress=console.log, maintenance=maintenance)
    first, last = result.samples[0], result.samples[-1]
    _print_figures(f"soak: {rate:,.0f} events/s for {seconds / 60:.0f} min, maintenance {'on' if maintenance else 'OFF'}", [
        ("events produced", f"{result.produced:,}"),
        ("rows + dead letters committed", f"{result.rows + result.dead_letters:,}"),
        ("duplicated events: by the pipeline / in Kafka", f"{result.duplicated_by_pipeline:,} / "
                                                          f"{result.duplicated_in_kafka:,}"),
        ("max live data files per day-partition", f"{max(s.data_files_max_partition for s in result.samples)} "
                                                   f"(goal <= {MAX_FILES_PER_PARTITION})"),
        ("snapshots first / last", f"{first.snapshots} / {last.snapshots}"),
        ("manifest KiB first / last", f"{first.manifest_bytes / 1024:,.0f} / {last.manifest_bytes / 1024:,.0f}"),
        (f"query CPU ms first / last (drift by {result.drift_span}, the goal)", f"{first.query_cpu_ms:,.0f} / {last.query_cpu_ms:,.0f} "
                                                         f"({result.drift:+.0%})"),
        ("query wall ms first / last (drift)", f"{first.query_ms:,.0f} / {last.query_ms:,.0f} ({result.wall_drift:+.0%})"),
        ("freshness p95 s first / last / worst", result.freshness_summary()),
    ])
    console.print(f"samples: {out / 'soak.csv'}, plot: {out / 'soak.png'}")
    _report(settings, out, time.monotonic() - began)
    return result


def _judge_pair(maintained: list, baseline: list, verdict, plot: Path) -> None:
    """The pair's freshness verdict, printed and drawn (both runs' samples on one axis)."""
    from lakehouse.soak_compare import plot_pair

    plot_pair(maintained, baseline, verdict, plot)
    _print_figures("freshness p95 unchanged by maintenance?", [
        ("with maintenance (median of windows)", f"{verdict.maintained_p95_s:.2f} s ({verdict.maintained_windows} windows)"),
        ("without maintenance (median of windows)", f"{verdict.baseline_p95_s:.2f} s ({verdict.baseline_windows} windows)"),
        ("compared from", f"minute {verdict.from_s / 60:.0f}"),
        ("gap (goal)", f"{verdict.gap:+.1%} (<= {verdict.tolerance:.0%}: {'met' if verdict.met else 'missed'})"),
    ])
    console.print(f"freshness of both runs: {plot}")


@app.command()
def upserts(
    keys: Annotated[int, typer.Option(help="Rows in the dimension-like table.")] = 200_000,
    batch: Annotated[int, typer.Option(help="Changed keys per MERGE.")] = 5_000,
    rounds: Annotated[int, typer.Option(help="Update batches before the delete files are folded.")] = 12,
) -> None:
    """MERGE cost and read latency as delete files accumulate, and after folding them (maintenance).

    Shows that inserts of new keys write no delete records (nothing for a key index to
    save) and how much folding delete files into data buys readers.
    """
    from pipeline.cdc.upsert_benchmark import run
    from pipeline.spark_session import build_session

    settings = stack_settings_or_exit("s3", "metastore")
    with friendly_errors():
        spark = build_session(settings, "lakehouse-bench-upserts")
        try:
            results = run(spark, settings, keys, batch, rounds, progress=console.log)
        finally:
            spark.stop()
    _print_figures(f"upserts: {keys:,} keys, {batch:,} changes per MERGE", [
        (r.label, f"merge {r.merge_s:.2f} s | deletes {r.delete_files} files (+{r.delete_records:,}) | "
                  f"scan {r.scan_ms:,.0f} ms | lookup {r.lookup_ms:,.0f} ms") for r in results])


@app.command("soak-plot")
def soak_plot(
    samples: Annotated[Path, typer.Argument(exists=True, dir_okay=False, help="A soak's soak.csv (results/soak-*/).")],
) -> None:
    """Redraw a soak's plot (soak.png beside its soak.csv) from the samples it saved.

    For a run from before a change to the plot, or to put a run's figures in docs/:
    files, snapshots, query time, freshness with maintenance's seconds, CPU per process
    (writer, maintenance, broker) and the click batch time, minute by minute.
    """
    from lakehouse.soak_plot import plot_soak, read_samples

    rows = read_samples(samples)
    if not rows:
        raise typer.BadParameter(f"{samples} holds no samples")
    out = samples.with_name("soak.png")
    plot_soak(rows, maintenance=any(x.compact_s or x.expire_s or x.other_maintenance_s for x in rows), path=out)
    console.print(f"plot: {out}")


@app.command("soak-compare")
def soak_compare(
    maintained: Annotated[Path, typer.Argument(exists=True, dir_okay=False,
                                               help="soak.csv of a run with maintenance.")],
    baseline: Annotated[Path, typer.Argument(exists=True, dir_okay=False,
                                             help="soak.csv of the same load without maintenance.")],
    from_minute: Annotated[float | None, typer.Option(
        help="Compare windows from this minute on (default: one snapshot retention in, "
             "LAKEHOUSE_MAINTENANCE__SNAPSHOT_RETENTION_MINUTES, at most half the run).")] = None,
    freshness_tolerance: Annotated[float, typer.Option(
        help="How much later data may arrive with maintenance (0.10 = 10 %).")] = FRESHNESS_TOLERANCE,
) -> None:
    """Judge 'freshness p95 unchanged by maintenance' for two saved soaks (what --pair does at its end).

    For runs made apart, e.g. one from `make soak` and one from `lakehouse bench soak
    --no-maintenance`: prints both medians and the gap, draws freshness-pair.png beside
    the first CSV, exits 1 when the gap is over the tolerance.
    """
    from lakehouse.settings import load_settings
    from lakehouse.soak_compare import compare_freshness, steady_start_s
    from lakehouse.soak_plot import read_samples

    runs = [read_samples(maintained), read_samples(baseline)]
    if not all(runs):
        raise typer.BadParameter(f"{maintained if not runs[0] else baseline} holds no samples")
    length = max((x.elapsed_s for x in runs[0] if x.under_load), default=runs[0][-1].elapsed_s)
    start = (from_minute * 60 if from_minute is not None
             else steady_start_s(load_settings().maintenance.snapshot_retention_minutes, length))
    verdict = compare_freshness(*runs, start, freshness_tolerance)
    _judge_pair(*runs, verdict, maintained.with_name("freshness-pair.png"))
    if not verdict.met:
        console.print(f"[red]goal missed:[/] {verdict.describe()}")
        raise typer.Exit(1)
