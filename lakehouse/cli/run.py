"""`lakehouse run ...`: the long-running jobs, in the foreground."""

from __future__ import annotations

import logging
import threading
from typing import Annotated

import typer

from lakehouse.cli.common import console, settings_or_exit

app = typer.Typer(help="Run a pipeline job in the foreground (Ctrl-C stops it after the current batch).",
                  no_args_is_help=True)


def _logging(level: str) -> None:
    logging.basicConfig(level=level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("py4j").setLevel(logging.WARNING)


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


def _run_single(name: str, trigger: float | None, max_batches: int | None, log_level: str) -> None:
    """One micro-batch job in its own Spark application, until Ctrl-C / SIGTERM."""
    from pipeline.app import job_factories
    from pipeline.metrics import serve
    from pipeline.runner import install_stop_handlers, run_loop
    from pipeline.spark_session import build_session

    _logging(log_level)
    settings = settings_or_exit()
    serve(settings.metrics.host, settings.metrics.pipeline_port)
    spark = build_session(settings, f"lakehouse-{name}")
    job = job_factories()[name](spark, settings)
    stop = threading.Event()
    install_stop_handlers(stop)
    console.print(f"{name}: running; metrics on http://{settings.metrics.host}:{settings.metrics.pipeline_port}/metrics")
    try:
        run_loop(job, trigger or settings.pipeline.trigger_seconds, stop, max_batches=max_batches)
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
def cdc(log_level: Annotated[str, typer.Option(help="Python log level.")] = "info") -> None:
    """Capture MariaDB/MySQL row changes as Debezium envelopes, one Kafka topic per table.

    First run: a consistent snapshot (op 'r'); then the binlog from exactly that position.
    Restarts resume after the last durable checkpoint.
    """
    from prometheus_client import start_http_server

    from pipeline.cdc.capture import Capture
    from pipeline.runner import install_stop_handlers

    _logging(log_level)
    settings = settings_or_exit()
    start_http_server(settings.metrics.cdc_port, addr=settings.metrics.host)
    stop = threading.Event()
    install_stop_handlers(stop)
    console.print(f"cdc: {settings.mariadb.database}.{{{', '.join(settings.cdc_tables)}}} -> "
                  f"{settings.kafka.cdc_topic_prefix}.*; metrics on :{settings.metrics.cdc_port}")
    Capture(settings).run(stop)


@app.command()
def dims(
    trigger: Annotated[float | None, typer.Option(help="Seconds between micro-batches (default from settings).")] = None,
    max_batches: Annotated[int | None, typer.Option(help="Stop after this many non-idle batches.")] = None,
    log_level: Annotated[str, typer.Option(help="Python log level.")] = "info",
) -> None:
    """Apply CDC topics to the Iceberg dimension tables (MERGE INTO, offsets in the same commit)."""
    _run_single("dims", trigger, max_batches, log_level)
