"""Several micro-batch jobs in one Spark application, each in its own FAIR pool.

On a 2-core machine one JVM per job would not fit; in Kubernetes each job is its own
SparkApplication instead. Jobs run in threads of the driver; Spark's FAIR scheduler
shares executors between their pools so a long batch of one job does not starve the
others. Each thread's batches are tagged with its pool via a local property.
"""

from __future__ import annotations

import logging
import threading

from lakehouse.settings import Settings
from pipeline.jobs import job_spec
from pipeline.runner import run_loop

log = logging.getLogger(__name__)


def run_job(job, settings: Settings, stop: threading.Event, trigger: float | None = None,
            max_batches: int | None = None) -> None:
    """Every job runs in the shared micro-batch loop, at its own trigger (``pipeline.jobs``)."""
    run_loop(job, trigger or job_spec(job.name).trigger(settings), stop, max_batches=max_batches)


def run_jobs(spark, settings: Settings, names: list[str], stop: threading.Event) -> None:
    """Each job in a thread of its own, in its FAIR pool; the first job that fails — starting or running —
    stops them all, and its error is raised."""
    specs = [job_spec(n) for n in names]  # an unknown name fails here, before any job starts
    # Imported here, one after another: jobs importing their modules side by side in their threads
    # left PyIceberg's modules half-initialised ("cannot import name ... from partially initialized module").
    factories = {spec.name: spec.factory_class() for spec in specs}
    errors: list[BaseException] = []

    def run_one(name: str) -> None:
        spark.sparkContext.setLocalProperty("spark.scheduler.pool", name)
        job = None
        try:
            job = factories[name](spark, settings)
            run_job(job, settings, stop)
        except BaseException as exc:  # a fatal job error, or a job that could not start, stops the application
            log.error("%s stopped the application: %s", name, exc)
            errors.append(exc)
            stop.set()
        finally:
            close = getattr(job, "close", None)
            if close:
                close()

    threads = [threading.Thread(target=run_one, args=(spec.name,), name=f"job-{spec.name}") for spec in specs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
