"""`lakehouse run ...`: the long-running jobs, in the foreground."""

from __future__ import annotations

import logging
import os
import threading
from typing import Annotated

import typer

from cli.common import console, settings_or_exit

app = typer.Typer(help="Run a pipeline job in the foreground (Ctrl-C stops it after the current batch).",
                  no_args_is_help=True)


def _logging(level: str) -> None:
    logging.basicConfig(level=level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("py4j").setLevel(logging.WARNING)


def _service(log_level: str, port_of) -> tuple:
    """Logging, settings, /metrics on ``port_of(settings.metrics)``, and a stop event Ctrl-C/SIGTERM set."""
    from pipeline.metrics import serve
    from pipeline.runner import install_stop_handlers

    _logging(log_level)
    settings = settings_or_exit()
    port = port_of(settings.metrics)
    field = next((name for name, value in settings.metrics.model_dump().items() if value == port), "pipeline_port")
    serve(settings.metrics.host, port, f"LAKEHOUSE_METRICS__{field.upper()}")
    stop = threading.Event()
    install_stop_handlers(stop)
    return settings, stop


@app.command()
def clicks(
    trigger: Annotated[float | None, typer.Option(help="Seconds between micro-batches (default from settings).")] = None,
    max_batches: Annotated[int | None, typer.Option(help="Stop after this many non-idle batches.")] = None,
    log_level: Annotated[str, typer.Option(help="Python log level.")] = "info",
) -> None:
    """Ingest ClickEvents: Kafka -> validate -> enrich -> Iceberg, exactly once.

    Offsets are committed in the same Iceberg snapshot as the rows, so the job can be
    killed at any moment and restarted: it resumes from the table.
    """
    _run_single("clicks", trigger, max_batches, log_level)


def _run_single(name: str, trigger: float | None, max_batches: int | None, log_level: str, **job_args) -> None:
    """One job in its own process and Spark application, until Ctrl-C / SIGTERM."""
    from pipeline.app import run_job
    from pipeline.jobs import job_spec
    from pipeline.spark_session import build_session

    spec = job_spec(name)
    settings, stop = _service(log_level, spec.port)
    if spec.lowers_priority:  # before the JVM starts, which inherits it: the writers get the cores first
        os.nice(settings.maintenance.nice)
    spark = build_session(settings, f"lakehouse-{name}")
    job = spec.factory_class()(spark, settings, **job_args)
    port = spec.port(settings.metrics)
    console.print(f"{name}: running; metrics on http://{settings.metrics.host}:{port}/metrics")
    try:
        run_job(job, settings, stop, trigger, max_batches)
    finally:
        job.close()
        spark.stop()


@app.command()
def pipeline(
    jobs: Annotated[str, typer.Option(help="Comma-separated jobs to run in one Spark application.")] = "clicks,dims",
    log_level: Annotated[str, typer.Option(help="Python log level.")] = "info",
) -> None:
    """Run several jobs in ONE Spark application (FAIR scheduler pools) - the local stack's way on 2 cores."""
    from pipeline.app import run_jobs
    from pipeline.metrics import serve
    from pipeline.runner import install_stop_handlers
    from pipeline.spark_session import build_session

    _logging(log_level)
    settings = settings_or_exit()
    serve(settings.metrics.host, settings.metrics.pipeline_port)
    spark = build_session(settings, "lakehouse-pipeline")
    stop = threading.Event()
    install_stop_handlers(stop)
    names = [n.strip() for n in jobs.split(",") if n.strip()]
    console.print(f"pipeline: jobs {', '.join(names)} in one Spark application (FAIR pools)")
    try:
        run_jobs(spark, settings, names, stop)
    finally:
        spark.stop()


@app.command()
def maintain(
    interval: Annotated[float | None, typer.Option(
        help="Seconds between passes (default LAKEHOUSE_MAINTENANCE__INTERVAL_SECONDS).")] = None,
    passes: Annotated[int | None, typer.Option(help="Stop after this many passes that changed something.")] = None,
    log_level: Annotated[str, typer.Option(help="Python log level.")] = "info",
) -> None:
    """Keep every table fast to read while the streaming writers run.

    Each pass reads each table's metadata and, on thresholds from settings (LAKEHOUSE_MAINTENANCE__*), compacts
    small files (sorted by the click table's sort order), folds delete files into data, rewrites manifests,
    expires old snapshots (never a writer's newest progress snapshot) and removes orphan files older than a safety
    margin.

    Commits that lose a race with a writer are retried, then left for the next pass: a streaming commit is never
    lost or duplicated.

    It runs at a lower CPU priority (LAKEHOUSE_MAINTENANCE__NICE, default 19), so on a machine it shares with the
    writers their batches come first and freshness does not pay for it.
    """
    _run_single("maintain", interval, passes, log_level)


@app.command()
def cdc(
    log_level: Annotated[str, typer.Option(help="Python log level.")] = "info",
    accept_ddl: Annotated[str | None, typer.Option(
        help="FILE:POS of a DDL that stopped the capture (its message names it), accepted after a decision: the "
             "lake keeps what it holds (a dropped column stays, null from then on) and the capture goes on.")] = None,
) -> None:
    """Capture MariaDB/MySQL row changes as Debezium envelopes, one Kafka topic per table.

    First run: a consistent snapshot (op 'r'); then the binlog from exactly that position.
    Restarts resume after the last durable checkpoint. The tables are the settings' (the seed's
    two and cdc.extra_tables); DDL on them is followed or stops the capture (docs/cdc.md).
    """
    from pipeline.capture.connector import Capture

    settings, stop = _service(log_level, lambda m: m.cdc_port)
    console.print(f"cdc: {settings.mariadb.database}.{{{', '.join(settings.cdc_tables)}}} -> "
                  f"{settings.kafka.cdc_topic_prefix}.*; metrics on :{settings.metrics.cdc_port}")
    Capture(settings, accept_ddl=accept_ddl).run(stop)


@app.command()
def dims(
    trigger: Annotated[float | None, typer.Option(help="Seconds between micro-batches (default from settings).")] = None,
    max_batches: Annotated[int | None, typer.Option(help="Stop after this many non-idle batches.")] = None,
    log_level: Annotated[str, typer.Option(help="Python log level.")] = "info",
) -> None:
    """Apply CDC topics to the Iceberg dimension tables, offsets in the same commit.

    A Spark application: tasks decode the changes and apply each key bucket's newest change per
    key where that bucket's key index is cached (pipeline/cdc/apply.py); the driver commits one
    snapshot per table with the offsets. SPARK_MASTER=local-cluster[2,1,1024] runs it with two
    executor processes. Killed at any moment, it resumes from the tables.
    """
    _run_single("dims", trigger, max_batches, log_level)


@app.command()
def aggregate(
    from_timestamp: Annotated[str | None, typer.Option(
        help="Only clicks committed at or after this time (ISO 8601, e.g. 2026-11-21T10:00:00Z, or epoch ms). "
             "Default: the whole table (backfill, then stream).")] = None,
    from_snapshot: Annotated[int | None, typer.Option(
        help="Only clicks committed in this snapshot of the click table and after (see its .snapshots).")] = None,
    trigger: Annotated[float | None, typer.Option(help="Seconds between micro-batches (default from settings).")] = None,
    max_batches: Annotated[int | None, typer.Option(help="Stop after this many non-idle batches.")] = None,
    log_level: Annotated[str, typer.Option(help="Python log level.")] = "info",
) -> None:
    """Live aggregates: the click table's new rows -> ads result tables, a few seconds behind it.

    Product views (productId, name, product_price, views, unique users) and activity per
    member level, exactly once. A Spark application: each batch reads the rows the click
    table's new appends added (Iceberg's incremental scan), aggregates them in Spark tasks and
    rewrites the small result tables (pipeline/aggregates/live.py); `run pipeline --jobs
    clicks,aggregate` runs it beside the click job. Its position is the click snapshot recorded in
    the result tables' last commit: the start point is used only while they have none; drop
    them to start over. Survives compaction and snapshot expiry (see
    LAKEHOUSE_PIPELINE__AGGREGATE_ON_SNAPSHOT_EXPIRED).
    """
    start_ms = _start_millis(from_timestamp, from_snapshot)
    _run_single("aggregate", trigger, max_batches, log_level, from_timestamp_ms=start_ms)


def _start_millis(from_timestamp: str | None, from_snapshot: int | None) -> int | None:
    import datetime as dt

    if from_timestamp is not None and from_snapshot is not None:
        raise typer.BadParameter("give --from-timestamp or --from-snapshot, not both")
    if from_snapshot is not None:
        from lakehouse.catalog import pyiceberg_catalog

        settings = settings_or_exit()
        snapshot = pyiceberg_catalog(settings).load_table(settings.catalog.clicks_table).snapshot_by_id(from_snapshot)
        if snapshot is None:
            raise typer.BadParameter(f"snapshot {from_snapshot} is not in {settings.catalog.clicks_table} "
                                     "(expired, or from another table)", param_hint="--from-snapshot")
        return snapshot.timestamp_ms
    if from_timestamp is None:
        return None
    if from_timestamp.isdigit():
        return int(from_timestamp)
    try:
        when = dt.datetime.fromisoformat(from_timestamp.replace("Z", "+00:00"))
    except ValueError:
        raise typer.BadParameter(f"{from_timestamp!r} is neither ISO 8601 nor epoch milliseconds",
                                 param_hint="--from-timestamp") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.timezone.utc)
    return int(when.timestamp() * 1000)


@app.command()
def batch(
    date: Annotated[str, typer.Option(
        help="Event day to (re)compute: YYYY-MM-DD, 'today' or 'yesterday' (UTC; the nightly schedule "
             "uses 'yesterday').")],
    log_level: Annotated[str, typer.Option(help="Python log level.")] = "warning",
) -> None:
    """Daily user-behaviour summary for one day -> ads table; re-running a day replaces that day only."""
    import datetime as dt

    from pipeline.aggregates.daily import build_day
    from pipeline.spark_session import build_session

    today = dt.datetime.now(dt.timezone.utc).date()
    try:
        day = {"today": today, "yesterday": today - dt.timedelta(days=1)}.get(date) or dt.date.fromisoformat(date)
    except ValueError:
        raise typer.BadParameter(f"{date!r} is not a date like 2026-11-21 (or 'today', 'yesterday')",
                                 param_hint="--date") from None
    _logging(log_level)
    settings = settings_or_exit()
    with console.status(f"computing the user-behaviour summary of {day}..."):
        spark = build_session(settings, "lakehouse-batch")
        try:
            rows = build_day(spark, settings, day)
        finally:
            spark.stop()
    console.print(f"{settings.catalog.daily_users_table}: {rows:,} user rows for {day} (that day replaced)")


@app.command(name="freshness-probe")
def freshness_probe(log_level: Annotated[str, typer.Option(help="Python log level.")] = "warning") -> None:
    """Export what readers see of every table (commit age, snapshots, files, newest event time).

    Reads each table through the catalog every LAKEHOUSE_METRICS__PROBE_INTERVAL_SECONDS,
    independent of the writers; metrics on the probe port for Prometheus.
    """
    from queries.freshness_probe import run as run_probe

    settings, stop = _service(log_level, lambda m: m.probe_port)
    console.print(f"freshness probe: every {settings.metrics.probe_interval_seconds:g}s; metrics on "
                  f"http://{settings.metrics.host}:{settings.metrics.probe_port}/metrics")
    run_probe(settings, stop)
