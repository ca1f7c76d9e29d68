"""`lakehouse bench batch`: where one click micro-batch spends its time, phase by phase.

Profile before optimising: this produces ``events`` ClickEvents to a topic of its own,
then times the click job's own code on that one batch, ``rounds`` times (after one
warm-up round): planning, the standing tasks' work alone (fetch, validation, enrichment
and the Parquet files, committed nowhere), and the whole batch (that and the Iceberg
commit). Each round reads the same records again into the run's own table. The
difference between the last two is what committing costs.
"""

from __future__ import annotations

import datetime as dt
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

from confluent_kafka.admin import NewTopic

from deploy.local.services.broker import admin_client
from lab.bench.ingest import bench_settings
from lab.bench.rate_producer import produce_at_rate
from lakehouse.settings import Settings
from pipeline.clicks.job import ClickIngestJob
from pipeline.kafka_source.batch_job import Batch
from pipeline.kafka_source.offsets import Position
from pipeline.spark_session import build_session


@dataclass(frozen=True)
class PhaseTimes:
    phase: str
    median_s: float
    min_s: float
    max_s: float


def _timed(rounds: int, step: Callable[[], object]) -> list[float]:
    step()  # warm-up: class loading and code generation stay out of the figures
    times = []
    for _ in range(rounds):
        began = time.monotonic()
        step()
        times.append(time.monotonic() - began)
    return times


def profile(settings: Settings, events: int, rounds: int, progress=print) -> list[PhaseTimes]:


    s = bench_settings(settings, time.strftime("%Y%m%d%H%M%S"), kind="profile")
    admin = admin_client(s)
    admin.create_topics([NewTopic(s.kafka.clicks_topic, s.kafka.clicks_partitions, 1)])[s.kafka.clicks_topic].result()
    sent = produce_at_rate(s.kafka.bootstrap, s.kafka.clicks_topic, events, 1.0).sent
    progress(f"{sent:,} events in {s.kafka.clicks_topic}; timing {rounds} rounds of each phase")
    spark = build_session(s, "lakehouse-bench-batch")
    job = ClickIngestJob(spark, s)
    try:
        def whole_batch():
            job.committed, job.committed_ids = {}, {}
            job.run_once()

        def tasks_only():
            ranges, marks = job.stream.latest_offset(Position())
            now = time.monotonic()
            job._run_tasks(Batch(ranges, marks, now, now), dt.datetime.now(dt.timezone.utc), int(time.time() * 1000))

        steps = {
            "plan": lambda: job.stream.latest_offset(Position()),
            "tasks: fetch + validate + enrich + Parquet files (no commit)": tasks_only,
            "batch: plan + tasks + commit": whole_batch,
        }
        out = []
        for phase, step in steps.items():
            times = _timed(rounds, step)
            out.append(PhaseTimes(phase, statistics.median(times), min(times), max(times)))
            progress(f"{phase}: median {out[-1].median_s:.3f} s")
        return out
    finally:
        job.close()
        spark.stop()
