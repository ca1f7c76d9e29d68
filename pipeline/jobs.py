"""Every long-running micro-batch job, declared once: what builds it, how often it runs, where its
metrics are, and how it shares a Spark application. Every job is a Spark application (or one of several
in a shared one, `run pipeline`).

Read by the command line (`lakehouse run <job>`, `run pipeline --jobs`), by the Spark session (one
FAIR pool per job) and by the runner. Before this, a job's facts were spread over five places (the
factories, their triggers, a list of jobs without Spark, their ports, and a special case for
maintenance's priority).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass

from lakehouse.service_settings import MetricsSettings
from lakehouse.settings import Settings


@dataclass(frozen=True)
class JobSpec:
    name: str
    factory: str  # "module:Class", imported on use: the click job loads pyspark, `run dims` never should
    trigger: Callable[[Settings], float]  # seconds between batches
    port: Callable[[MetricsSettings], int]  # its /metrics port when it runs as a process of its own
    pool_weight: Callable[[Settings], tuple[int, int]]  # (weight, minShare) of its FAIR pool in a shared app
    lowers_priority: bool = False  # maintenance: nice itself before its JVM starts, so the writers come first

    def factory_class(self) -> Callable:
        module, _, name = self.factory.partition(":")
        return getattr(importlib.import_module(module), name)


def _writer_pool(settings: Settings) -> tuple[int, int]:
    return settings.pipeline.writer_pool_weight, 1


JOBS: dict[str, JobSpec] = {spec.name: spec for spec in (
    JobSpec("clicks", "pipeline.clicks.job:ClickIngestJob",
            trigger=lambda s: s.pipeline.trigger_seconds, port=lambda m: m.pipeline_port, pool_weight=_writer_pool),
    JobSpec("dims", "pipeline.cdc.apply:DimensionApplyJob",
            trigger=lambda s: s.pipeline.dims_trigger_seconds, port=lambda m: m.pipeline_port,
            pool_weight=_writer_pool),
    JobSpec("aggregate", "pipeline.aggregates.live:LiveAggregates",
            trigger=lambda s: s.pipeline.aggregate_trigger_seconds, port=lambda m: m.aggregate_port,
            pool_weight=_writer_pool),
    JobSpec("maintain", "pipeline.maintenance.job:MaintenanceJob",
            trigger=lambda s: s.maintenance.interval_seconds, port=lambda m: m.maintenance_port,
            pool_weight=lambda s: (1, 0), lowers_priority=True),
)}


def job_spec(name: str) -> JobSpec:
    """The job called ``name``, or a ValueError listing the jobs there are."""
    if name not in JOBS:
        raise ValueError(f"unknown job {name!r}; available: {', '.join(JOBS)}")
    return JOBS[name]
