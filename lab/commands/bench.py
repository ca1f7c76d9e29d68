"""`lakehouse bench ...`: benchmarks that print their figures (never timed tests)."""

from __future__ import annotations

import json
import time
from typing import Annotated

import typer
from rich.table import Table

from cli.common import console, friendly_errors, print_figures, stack_settings_or_exit
from lab.commands.bench_cdc import APPLY_TITLES, cdc_peers
from lab.commands.bench_commits import commit_lock, snapshot_growth, visibility
from lab.commands.bench_enrichment import enrichment
from lab.commands.bench_ingest import CLICK_STACK, ingest
from lab.commands.bench_peers import peers
from lab.commands.bench_soak import soak, soak_compare, soak_plot
from lab.commands.common import record_figures, run_report
from lakehouse.settings import REPO_ROOT, results_path

app = typer.Typer(help="Benchmarks on the local stack; figures are printed and saved under results/.",
                  no_args_is_help=True)
app.command()(ingest)  # first in --help: the headline benchmark


@app.command()
def headroom(
    rates: Annotated[str, typer.Option(help="Comma-separated rates to climb through (events/s).")] =
        "10000,15000,20000,25000,30000,35000,40000",
    seconds: Annotated[float, typer.Option(help="Seconds of load per rate.")] = 60,
    record: Annotated[bool, typer.Option(help="Also append the figures as dated rows to docs/benchmarks.md.")] = False,
) -> None:
    """The highest click rate sustained with freshness p95 <= 10 s, against the raw ceiling (goal: >= 50 %).

    Climbs through the rates, each on a topic of its own in one Spark application, and stops
    at the first that does not hold (committed < 99 % of produced, or p95 > 10 s).
    """
    from lab.bench.headroom import P95_BOUND_S, run
    from pipeline.metrics import serve

    settings = stack_settings_or_exit(*CLICK_STACK)
    out = results_path("bench-headroom")
    out.mkdir(parents=True, exist_ok=True)
    with friendly_errors():
        serve(settings.metrics.host, settings.metrics.pipeline_port)
        result = run(settings, [float(r) for r in rates.split(",")], seconds, out, progress=console.log)
    table = Table(title=f"headroom: rates held {seconds:.0f} s each (p95 <= {P95_BOUND_S:g} s, committed >= 99 %)")
    for column in ("target/s", "produced/s", "committed/s", "p95 (s)", "drain (s)", "held"):
        table.add_column(column, justify="right")
    for s in result.steps:
        table.add_row(f"{s.rate:,.0f}", f"{s.produced_eps:,.0f}", f"{s.sustained_eps:,.0f}", f"{s.p95_s:.1f}",
                      f"{s.drain_s:.1f}", "yes" if s.held else "no")
    console.print(table)
    console.print(f"highest rate held {result.best_eps:,.0f} events/s; raw ceiling {result.raw_ceiling_eps:,.0f} "
                  f"events/s; ratio {result.ratio:.0%} (goal >= 50 %)")
    console.print(f"the pipeline alone (catch-up, nothing producing): {result.catch_up_eps:,.0f} events/s, "
                  f"{result.catch_up_ratio:.0%} of the raw ceiling, which also runs alone")
    (out / "bench-headroom.json").write_text(json.dumps(result.as_dict(), indent=2))
    if record:
        from lab.bench.record import headroom_figures

        record_figures(headroom_figures(result, f"bench headroom --rates {rates} --seconds {seconds:g}"))


@app.command()
def batch(
    events: Annotated[int, typer.Option(help="Events in the batch (20,000 = 2 s at 10,000 events/s).")] = 20_000,
    rounds: Annotated[int, typer.Option(help="Timed rounds per phase, after one warm-up round.")] = 5,
) -> None:
    """Where one click micro-batch spends its time: plan, read (fetch + validate + enrich), and the whole batch.

    Profile this before changing the hot path, and again after: the medians are the figures
    docs/performance.md quotes.
    """
    from lab.bench.batch_profile import profile

    settings = stack_settings_or_exit(*CLICK_STACK)
    with friendly_errors():
        phases = profile(settings, events, rounds, progress=console.log)
    print_figures(f"one batch of {events:,} events, medians of {rounds} rounds (min - max)",
                   [(p.phase, f"{p.median_s:.3f} s ({p.min_s:.3f} - {p.max_s:.3f})") for p in phases])


@app.command()
def standard(
    ingest_seconds: Annotated[float, typer.Option(help="Seconds of the 10,000 events/s ingest run.")] = 180,
    cdc_seconds: Annotated[float, typer.Option(help="Seconds of the 1,000 changes/s CDC run.")] = 90,
    system_seconds: Annotated[float, typer.Option(help="Seconds of the whole-system run (2,000 events/s + 20 "
                                                       "changes/s).")] = 180,
    record: Annotated[bool, typer.Option(help="Append the figures to docs/benchmarks.md (--no-record: print "
                                              "only).")] = True,
) -> None:
    """The standard set (`make bench`, about 15 minutes): ingest at 10,000 events/s, CDC at 1,000 changes/s and
    the whole system at the demo's load, each figure printed against its goal and appended as a dated row to
    docs/benchmarks.md (JSON under results/)."""
    from lab.bench.record import BENCHMARKS_MD, append_rows, run_standard
    from pipeline.metrics import serve

    settings = stack_settings_or_exit(*CLICK_STACK, "mariadb")
    out = results_path("bench-standard")
    out.mkdir(parents=True, exist_ok=True)
    with friendly_errors():
        serve(settings.metrics.host, settings.metrics.pipeline_port)
        figures = run_standard(settings, out, ingest_seconds, cdc_seconds, system_seconds, console,
                               progress=console.log)
    table = Table(title="standard benchmarks")
    for column in ("benchmark", "figure", "value", "goal", "met"):
        table.add_column(column)
    for f in figures:
        table.add_row(*f.cells())
    console.print(table)
    if record:
        from lab.headline import write

        append_rows(figures)
        console.print(f"appended {len(figures)} rows to {BENCHMARKS_MD.relative_to(REPO_ROOT)}; JSON in {out}")
        if write():
            console.print("README.md's and docs/scaling.md's figures regenerated from them (`lakehouse bench headline`)")


@app.command()
def headline() -> None:
    """Write the README's headline figures and docs/scaling.md's sizing figures from docs/benchmarks.md's rows
    (`make bench` runs this itself).

    Each figure is the latest row of its kind, with its goal and the range over the runs since
    the last change to the path measured (at most five, named by commit). `make lint` fails when
    a doc's block differs from what the rows give.
    """
    from lab.headline import BLOCKS, write

    with friendly_errors():
        changed = write()
    console.print(f"{', '.join(b.path.name for b in BLOCKS)}: figures {'regenerated' if changed else 'already current'}")


@app.command()
def load(
    rates: Annotated[str, typer.Option(help="Comma-separated target rates to try.")] = "10000,20000,40000,80000",
    workers: Annotated[str, typer.Option(help="Comma-separated worker counts to try.")] = "1,2",
    seconds: Annotated[float, typer.Option(help="Seconds per trial.")] = 10,
) -> None:
    """Highest events/s Locust sustains against the local broker, per process count, with produce latency."""
    from loadgen.run import run

    settings = stack_settings_or_exit("kafka", "s3")
    out = results_path("bench-load")
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
    run_report(settings, out, time.monotonic() - began)


@app.command()
def cdc(
    rate: Annotated[float, typer.Option(help="Database changes per second.")] = 1000,
    duration: Annotated[float, typer.Option(help="Seconds to write for.")] = 60,
    members: Annotated[int, typer.Option(
        help="0: the seed's tables, products inserted and updated. N: a member table of N generated rows, "
             "snapshotted by the capture's first run, then 80 % updates, 10 % inserts, 10 % deletes.", min=0)] = 0,
    engines: Annotated[str, typer.Option(help="With --members: the readers checked against MariaDB.")]
        = "duckdb,spark,trino",
    chaos: Annotated[bool, typer.Option(help="With --members: kill -9 the capture and the apply job once during "
                                             "the snapshot and once during the changes (each restarted); every "
                                             "reader must still equal MariaDB.")] = False,
    keep: Annotated[bool, typer.Option(help="Keep the run's own topic(s), tables (and database) afterwards, to look "
                                            "at them; by default they are removed once the figures are read.")] = False,
    apply: Annotated[str, typer.Option(help="What applies the changes: 'pipeline' (`lakehouse run dims`, the Spark "
                                            "apply), 'merge-peer' (Iceberg's standard Spark path, MERGE INTO each "
                                            "batch: lab/peers/cdc_merge.py), 'python-peer' (the apply as one "
                                            "Python process: lab/peers/cdc_python.py) or, with --members, "
                                            "'flink-peer' (seed 004's Flink upsert sink: "
                                            "lab/peers/flink_cdc_job.py).")] = "pipeline",
    flink_checkpoint: Annotated[float, typer.Option(help="With --apply flink-peer: its checkpoint interval in "
                                                         "seconds (it commits once per checkpoint).")] = 1.0,
    record: Annotated[bool, typer.Option(help="With --members: also append the figures, held to their goals, as "
                                              "dated rows to docs/benchmarks.md.")] = False,
) -> None:
    """Sustained changes/s and apply freshness p50/p95 (database commit -> visible in Iceberg).

    With --members N also: the load and initial-snapshot rates, peak memory of the capture and the
    apply, write amplification, delete files, and every reader's view of the table against MariaDB.

    Example: lakehouse bench cdc --rate 1000 --duration 300 --members 10000000
    """
    settings = stack_settings_or_exit(*CLICK_STACK, "mariadb")
    if apply not in APPLY_TITLES:
        raise typer.BadParameter(f"one of {', '.join(APPLY_TITLES)}; got {apply!r}", param_hint="--apply")
    if members:
        from lab.commands.bench_cdc import cdc_at_scale  # deferred: the at-scale run pulls in DuckDB, Spark, Trino

        cdc_at_scale(settings, rate, duration, members, tuple(e for e in engines.split(",") if e), chaos, keep, apply,
                     record, flink_checkpoint)
        return
    if apply == "flink-peer":
        raise typer.BadParameter("the Flink peer runs at scale only: give --members N", param_hint="--apply")
    from lab.bench.cdc import run
    from pipeline.metrics import serve

    began = time.monotonic()
    with friendly_errors():
        serve(settings.metrics.host, settings.metrics.pipeline_port)  # so Prometheus sees the run
        result = run(settings, rate, duration, progress=console.log, keep=keep, apply=apply)
    print_figures(f"CDC benchmark{APPLY_TITLES[apply]}: {rate:,.0f} changes/s "
                  f"for {duration:.0f}s", [
        ("changes written", f"{result.changes:,}"),
        ("sustained changes/s (applied while the load ran)", f"{result.sustained_cps:,.0f}"),
        ("until the last change was applied (s)", f"{result.applied_s:.1f}"),
        ("apply freshness p50 (s)", f"{result.freshness_p50_s:.2f}"),
        ("apply freshness p95 (s)", f"{result.freshness_p95_s:.2f}"),
    ])
    run_report(settings, results_path("bench-cdc"),
            time.monotonic() - began)


@app.command()
def system(
    rate: Annotated[float, typer.Option(help="ClickEvents per second (Locust, 1 % deliberately bad).")] = 2000,
    changes: Annotated[float, typer.Option(help="Database changes per second (Locust).")] = 20,
    duration: Annotated[float, typer.Option(help="Seconds of load (the goal is stated for 600).")] = 600,
    record: Annotated[bool, typer.Option(help="Also append the figures as dated rows to docs/benchmarks.md.")] = False,
) -> None:
    """Everything running together, as `make demo` runs it: freshness per table and exactly-once checks.

    Capture, dimension apply, click ingestion and live aggregates run on the stack's broker
    with topics, tables and a source database of the run's own; Locust produces the events
    and the database changes. Goals (p95): clicks <= 5 s, dimensions <= 5 s, aggregates <= 10 s.
    """
    from lab.bench.system import run
    from lab.system_jobs import SYSTEM_STACK
    from pipeline.metrics import serve

    settings = stack_settings_or_exit(*SYSTEM_STACK)
    out = results_path("bench-system")
    out.mkdir(parents=True, exist_ok=True)
    began = time.monotonic()
    with friendly_errors():
        serve(settings.metrics.host, settings.metrics.pipeline_port)
        result = run(settings, rate, changes, duration, out, console)
    print_figures(f"whole system: {rate:,.0f} events/s + {changes:g} changes/s for {duration:.0f}s", [
        ("events produced / committed", f"{result.produced:,} / {result.committed:,}"),
        ("sustained events/s (committed slope under load)", f"{result.sustained_eps:,.0f}"),
        ("database changes made", f"{result.changes:,}"),
    ] + [(f"{f.name} freshness p50 / p95 / p99 (s)", f"{f.p50_s:.2f} / {f.p95_s:.2f} / {f.p99_s:.2f}")
         for f in result.freshness]
      + [(f"CPU under load (cores): {part}", f"{cores:.2f}") for part, cores in result.cpu_cores.items()])
    for f in result.freshness:
        console.print(("[green]" if f.met else "[red]") + f.verdict() + ("[/green]" if f.met else "[/red]"))
    for c in result.checks:
        console.print(f"{'[green]exact' if c.ok else '[red]NOT exact'}[/]: {c.name} ({c.detail})")
    console.print(f"saved {result.save(out)}")
    if record:
        from lab.bench.record import system_figures

        record_figures(system_figures(result, f"bench system --rate {rate:.0f} --changes {changes:g} "
                                       f"--duration {duration:.0f}"))
    run_report(settings, out, time.monotonic() - began)
    if not result.exact:
        raise typer.Exit(1)


@app.command()
def query(
    rows: Annotated[int, typer.Option(help="Rows of the click table made for the run (1 % then deleted).")] = 1_000_000,
    runs: Annotated[int, typer.Option(help="Runs per figure (the median is reported).")] = 3,
    engines: Annotated[str, typer.Option(help="Comma-separated engines to time: duckdb, trino (Trino starts on "
                                              "first use).")] = "duckdb,trino",
    record: Annotated[bool, typer.Option(help="Also append the figures as dated rows to docs/benchmarks.md.")] = False,
) -> None:
    """How long a question takes, per engine: one-shot `lakehouse query`, a statement in `lakehouse sql`, each
    library query.

    Makes a click table of --rows rows with position deletes (Spark), then, on each engine, times a
    count(*) as a new process and inside a running session, and every query in queries/sql in the
    session. Goals: one-shot <= 1 s, in the shell <= 0.3 s, each library query <= 1 s.
    """
    import json

    from lab.bench.query import LIBRARY_GOAL_S, ONE_SHOT_GOAL_S, SHELL_GOAL_S, run
    from lab.bench.record import at_most

    chosen = tuple(e.strip() for e in engines.split(",") if e.strip())
    unknown = [e for e in chosen if e not in ("duckdb", "trino")]
    if unknown or not chosen:
        raise typer.BadParameter(f"engines are duckdb and trino, got {engines!r}", param_hint="--engines")
    settings = stack_settings_or_exit(*CLICK_STACK)
    with friendly_errors():
        results = run(settings, rows, runs, progress=console.log, engines=chosen)
    out = results_path("bench-query", ".json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps([r.as_dict() for r in results], indent=2))
    command = f"bench query --rows {rows} --engines {','.join(chosen)}"
    figures = []
    for result in results:
        on = f" ({result.engine})"
        part = [at_most(command, "one-shot `lakehouse query` count(*), wall" + on, result.one_shot_s, "s",
                        ONE_SHOT_GOAL_S),
                at_most(command, "count(*) in a running `lakehouse sql`" + on, result.shell_s, "s", SHELL_GOAL_S)]
        part += [at_most(command, f"library query {name} in a running session{on}", seconds, "s", LIBRARY_GOAL_S)
                 for name, seconds in result.library_s.items()]
        print_figures(f"queries on {rows:,} clicks ({result.deleted:,} deleted), {result.engine}, medians of {runs}",
                      [(f.figure, f"{f.value:.2f} s ({'met' if f.met else 'NOT met'}: {f.goal})") for f in part])
        figures += part
    console.print(f"saved {out.relative_to(REPO_ROOT)}")
    if record:
        record_figures(figures)


@app.command()
def evolution(
    batch_events: Annotated[int, typer.Option(help="Events per batch (1 % bad), produced before each batch.")]
        = 10_000,
    record: Annotated[bool, typer.Option(help="Also append the figures as dated rows to docs/benchmarks.md.")] = False,
) -> None:
    """What the batch that adds columns to the click table costs, and the batch after it, against a usual batch.

    The click job alone, on a topic and tables of its own: usual batches, then one whose
    events carry new fields (deviceType, appVersion), then the batches after it.
    docs/schema-evolution.md says why the evolving batch is written by the driver.
    """
    from lab.bench.evolution import run
    from lab.bench.record import Figure

    settings = stack_settings_or_exit(*CLICK_STACK)
    with friendly_errors():
        result = run(settings, batch_events, progress=console.log)
    out = results_path("bench-evolution", ".json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result.as_dict(), indent=2))
    command = f"bench evolution --batch-events {batch_events}"
    figures = [Figure(command, name, value, "s") for name, value in [
        ("usual batch (median)", result.usual_s), ("the evolving batch (new columns, rows, offsets)", result.evolving_s),
        ("the first batch after it", result.next_s), ("batches after that (median)", result.settled_s)]]
    print_figures(f"schema evolution, batches of {batch_events:,} events",
                  [(f.figure, f"{f.value:.2f} s") for f in figures])
    console.print(f"saved {out.relative_to(REPO_ROOT)}")
    if record:
        record_figures(figures)


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
    from lab.bench.upserts import run
    from pipeline.spark_session import build_session

    settings = stack_settings_or_exit("s3", "metastore")
    with friendly_errors():
        spark = build_session(settings, "lakehouse-bench-upserts")
        try:
            results = run(spark, settings, keys, batch, rounds, progress=console.log)
        finally:
            spark.stop()
    print_figures(f"upserts: {keys:,} keys, {batch:,} changes per MERGE", [
        (r.label, f"merge {r.merge_s:.2f} s | deletes {r.delete_files} files (+{r.delete_records:,}) | "
                  f"scan {r.scan_ms:,.0f} ms | lookup {r.lookup_ms:,.0f} ms") for r in results])



app.command()(soak)
app.command()(peers)
app.command()(enrichment)
app.command("soak-plot")(soak_plot)
app.command("soak-compare")(soak_compare)
app.command(name="cdc-peers")(cdc_peers)
app.command(name="commit-lock")(commit_lock)
app.command(name="snapshot-growth")(snapshot_growth)
app.command()(visibility)
