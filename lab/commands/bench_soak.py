"""`lakehouse bench soak`, `soak-plot`, `soak-compare`: hours of steady load, and their plots and verdicts."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer

from cli.common import console, friendly_errors, print_figures, stack_settings_or_exit
from lab.commands.common import run_report
from lakehouse.settings import results_path


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
    freshness_tolerance: Annotated[float | None, typer.Option(
        help="With --pair: how much later data may arrive with maintenance (default 0.10 = 10 %).")] = None,
) -> None:
    """Hours of steady load with maintenance on: do files, metadata, query latency and freshness stay flat?

    Samples every EVERY: live data files in the fullest day-partition, delete files,
    snapshots, manifest bytes, the soak queries' latency on DuckDB, freshness p95. At the
    end checks every produced event is in the table exactly once. Writes soak.csv and
    soak.png under results/; exits 1 when a goal is missed.

    Maintenance runs as `lakehouse run maintain` in a process of its own, at
    LAKEHOUSE_MAINTENANCE__NICE (its log: maintenance.log beside the results).
    With --pair the baseline follows on a topic and tables of its own, and
    freshness-pair.png shows both runs' freshness.
    """
    from lab.soak.compare import compare_freshness, steady_start_s
    from loadgen.run import parse_duration

    settings = stack_settings_or_exit("s3", "metastore", "kafka")
    try:
        seconds, interval = parse_duration(duration), parse_duration(every)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None
    if pair and not maintenance:
        raise typer.BadParameter("--pair runs the baseline itself after the run with maintenance: drop --no-maintenance")
    results = [_soak_once(settings, rate, seconds, interval, drift, maintenance)]
    if pair:
        results.append(_soak_once(settings, rate, seconds, interval, drift, False))
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


def _soak_once(settings, rate: float, seconds: float, interval: float, drift: float, maintenance: bool):
    """One soak on a topic and tables of its own, its figures printed and its report written."""
    from lab.soak.run import run_soak
    from lab.soak.samples import MAX_FILES_PER_PARTITION
    from pipeline.metrics import serve

    out = results_path("soak")
    began = time.monotonic()
    with friendly_errors():
        serve(settings.metrics.host, settings.metrics.pipeline_port)
        out.mkdir(parents=True, exist_ok=True)
        result = run_soak(settings, rate, seconds, interval, out, drift, progress=console.log, maintenance=maintenance)
    first, last = result.samples[0], result.samples[-1]
    print_figures(f"soak: {rate:,.0f} events/s for {seconds / 60:.0f} min, maintenance {'on' if maintenance else 'OFF'}", [
        ("events produced", f"{result.produced:,}"),
        ("rows + dead letters committed", f"{result.rows + result.dead_letters:,}"),
        ("duplicated events: by the pipeline / in Kafka", f"{result.duplicated_by_pipeline:,} / "
                                                          f"{result.duplicated_in_kafka:,}"),
        ("max live data files per day-partition", f"{max(s.data_files_max_partition for s in result.samples)} "
                                                   f"(goal <= {MAX_FILES_PER_PARTITION})"),
        ("snapshots first / last", f"{first.snapshots} / {last.snapshots}"),
        ("metadata file KiB first / last", f"{first.metadata_bytes / 1024:,.0f} / {last.metadata_bytes / 1024:,.0f}"),
        ("manifest KiB first / last", f"{first.manifest_bytes / 1024:,.0f} / {last.manifest_bytes / 1024:,.0f}"),
        (f"query CPU ms first / last (drift: {result.drift_span}, the goal)",
         f"{first.query_cpu_ms:,.0f} / {last.query_cpu_ms:,.0f} ({result.drift:+.0%})"),
        ("query wall ms first / last (drift)", f"{first.query_ms:,.0f} / {last.query_ms:,.0f} ({result.wall_drift:+.0%})"),
        ("freshness p95 s first / last / worst", result.freshness_summary()),
    ])
    console.print(f"samples: {out / 'soak.csv'}, plot: {out / 'soak.png'}")
    run_report(settings, out, time.monotonic() - began)
    return result


def _judge_pair(maintained: list, baseline: list, verdict, plot: Path) -> None:
    """The pair's freshness verdict, printed and drawn (both runs' samples on one axis)."""
    from lab.soak.compare import plot_pair

    plot_pair(maintained, baseline, verdict, plot)
    print_figures("freshness p95 unchanged by maintenance?", [
        ("with maintenance (median of windows)", f"{verdict.maintained_p95_s:.2f} s ({verdict.maintained_windows} windows)"),
        ("without maintenance (median of windows)", f"{verdict.baseline_p95_s:.2f} s ({verdict.baseline_windows} windows)"),
        ("compared from", f"minute {verdict.from_s / 60:.0f}"),
        ("gap (goal)", f"{verdict.gap:+.1%} (<= {verdict.tolerance:.0%}: {'met' if verdict.met else 'missed'})"),
    ])
    console.print(f"freshness of both runs: {plot}")


def soak_plot(
    samples: Annotated[Path, typer.Argument(exists=True, dir_okay=False, help="A soak's soak.csv (results/soak-*/).")],
) -> None:
    """Redraw a soak's plot (soak.png beside its soak.csv) from the samples it saved.

    For a run from before a change to the plot, or to put a run's figures in docs/:
    files, snapshots, query time, freshness with maintenance's seconds, CPU per process
    (writer, maintenance, broker) and the click batch time, minute by minute.
    """
    from lab.soak.plot import plot_soak
    from lab.soak.samples import read_samples

    rows = read_samples(samples)
    if not rows:
        raise typer.BadParameter(f"{samples} holds no samples")
    out = samples.with_name("soak.png")
    plot_soak(rows, maintenance=any(x.compact_s or x.expire_s or x.other_maintenance_s for x in rows), path=out)
    console.print(f"plot: {out}")


def soak_compare(
    maintained: Annotated[Path, typer.Argument(exists=True, dir_okay=False,
                                               help="soak.csv of a run with maintenance.")],
    baseline: Annotated[Path, typer.Argument(exists=True, dir_okay=False,
                                             help="soak.csv of the same load without maintenance.")],
    from_minute: Annotated[float | None, typer.Option(
        help="Compare windows from this minute on (default: one snapshot retention in, "
             "LAKEHOUSE_MAINTENANCE__SNAPSHOT_RETENTION_MINUTES, at most half the run).")] = None,
    freshness_tolerance: Annotated[float | None, typer.Option(
        help="How much later data may arrive with maintenance (default 0.10 = 10 %).")] = None,
) -> None:
    """Judge 'freshness p95 unchanged by maintenance' for two saved soaks (what --pair does at its end).

    For runs made apart, e.g. one from `make soak` and one from `lakehouse bench soak
    --no-maintenance`: prints both medians and the gap, draws freshness-pair.png beside
    the first CSV, exits 1 when the gap is over the tolerance.
    """
    from lab.soak.compare import compare_freshness, steady_start_s
    from lab.soak.samples import read_samples
    from lakehouse.settings import load_settings

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
