"""Several micro-batch jobs in one Spark application, each in its own FAIR pool.

On a 2-core machine one JVM per job would not fit; in Kubernetes each job is its own
SparkApplication instead. Jobs run in threads of the driver; Spark's FAIR scheduler
shares executors between their pools so a long batch of one job does not starve the
others. Each thread's batches are tagged with its pool via a local property.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from lakehouse.settings import Settings
from pipeline.runner import MicroBatchJob, run_loop

log = logging.getLogger(__name__)

JobFactory = Callable[..., MicroBatchJob]


def job_factories() -> dict[str, JobFactory]:
    """The jobs that can share an application, by name."""
    # deferred: the click job loads pyspark; `lakehouse run dims` and `run aggregate` never need it
    from pipeline.aggregates.live import LiveAggregates
    from pipeline.cdc.apply import DimensionApplyJob
    from pipeline.clicks.job import ClickIngestJob
    from pipeline.maintenance.job import MaintenanceJob

    return {"clicks": ClickIngestJob, "dims": DimensionApplyJob, "aggregate": LiveAggregates,
            "maintain": MaintenanceJob}


def run_job(job, settings: Settings, stop: threading.Event, trigger: float | None = None,
            max_batches: int | None = None) -> None:
    """Every job runs in the shared micro-batch loop, at its own trigger."""
    run_loop(job, trigger or _default_trigger(job, settings), stop, max_batches=max_batches)


def _default_trigger(job, settings: Settings) -> float:
    return {"maintain": settings.maintenance.interval_seconds, "dims": settings.pipeline.dims_trigger_seconds,
            "aggregate": settings.pipeline.aggregate_trigger_seconds}.get(job.name, settings.pipeline.trigger_seconds)


def run_jobs(spark, settings: Settings, names: list[str], stop: threading.Event) -> None:
    factories = job_factories()
    unknown = [n for n in names if n not in factories]
    if unknown:
        raise ValueError(f"unknown job(s) {unknown}; available: {', '.join(factories)}")
    errors: list[BaseException] = []

    def run_one(name: str) -> None:
        spark.sparkContext.setLocalProperty("spark.scheduler.pool", name)
        job = factories[name](spark, settings)
        try:
            run_job(job, settings, stop)
        except BaseException as exc:  # a fatal job error stops the whole application
            errors.append(exc)
            stop.set()
        finally:
            close = getattr(job, "close", None)
            if close:
                close()

    threads = [threading.Thread(target=run_one, args=(n,), name=f"job-{n}") for n in names]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
