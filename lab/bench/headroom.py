"""`lakehouse bench headroom`: the highest click rate the pipeline sustains with freshness p95 <= 10 s.

Rates are tried in rising steps, each on a topic and tables of its own, in one Spark
application (so the JVM's start-up and compilation are paid once, in the warm-up). A step
holds when the committed count rises as fast as events are produced (>= 99 %) and the
freshness p95 stays within the bound; the first step that fails ends the climb. The raw
ceiling (Kafka -> Parquet with no Spark, ``lab.bench.ingest.raw_ceiling``) is then
measured on the last step's topic, and the ratio printed: the issue's goal is >= 50 %.

The climb shares the two cores with its own producers, while the raw ceiling runs alone. So the
pipeline's own ceiling is measured alone too, like with like: a fresh job on tables of its own
reads the last step's topic from the start, with nothing producing (the catch-up rate after an
outage), and its ratio to the raw ceiling is printed beside the climb's.
"""

from __future__ import annotations

import math
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from confluent_kafka.admin import NewTopic

from deploy.local.services.broker import admin_client
from lab.bench import freshness
from lab.bench.ingest import bench_settings, commit_rate, committed_total, raw_ceiling, warm_up
from lab.bench.scratch import discard
from lakehouse import kafka_clients
from lakehouse.settings import Settings
from pipeline.clicks.job import ClickIngestJob
from pipeline.runner import run_loop
from pipeline.spark_session import build_session

#: freshness p95 a rate must keep to count as sustained (issue 28, goal 2)
P95_BOUND_S = 10.0
#: seconds of load before the first counted step
WARM_UP_S = 20.0
#: events/s given to one producer process (an event costs ~3 µs to make and encode: loadgen/events.py)
PRODUCER_RATE = 20_000


@dataclass
class Step:
    rate: float
    produced_eps: float  # what the producer achieved
    sustained_eps: float  # slope of the committed count under load
    p95_s: float
    drain_s: float
    topic: str  # the step's own, kept for the raw ceiling

    @property
    def held(self) -> bool:
        return self.sustained_eps >= 0.99 * self.produced_eps and self.p95_s <= P95_BOUND_S


@dataclass
class HeadroomResult:
    steps: list[Step] = field(default_factory=list)
    raw_ceiling_eps: float = 0.0
    catch_up_eps: float = 0.0  # the pipeline alone, draining the last step's topic from the start

    @property
    def best_eps(self) -> float:
        """The highest rate among the steps that held (what was produced, or committed if that was less)."""
        return max((min(s.produced_eps, s.sustained_eps) for s in self.steps if s.held), default=0.0)

    @property
    def ratio(self) -> float:
        return self.best_eps / self.raw_ceiling_eps if self.raw_ceiling_eps else 0.0

    @property
    def catch_up_ratio(self) -> float:
        return self.catch_up_eps / self.raw_ceiling_eps if self.raw_ceiling_eps else 0.0

    def as_dict(self) -> dict:
        return {"steps": [asdict(s) | {"held": s.held} for s in self.steps], "raw_ceiling_eps": self.raw_ceiling_eps,
                "best_eps": self.best_eps, "ratio": self.ratio, "catch_up_eps": self.catch_up_eps,
                "catch_up_ratio": self.catch_up_ratio}


def _step(spark, settings: Settings, rate: float, seconds: float, progress) -> Step:


    s = bench_settings(settings, f"{time.strftime('%Y%m%d%H%M%S')}_{int(rate)}", kind="headroom")
    topic = s.kafka.clicks_topic
    admin = admin_client(s)
    admin.create_topics([NewTopic(topic, s.kafka.clicks_partitions, 1)])[topic].result()
    job = ClickIngestJob(spark, s)
    stop = threading.Event()
    loop = threading.Thread(target=run_loop, args=(job, s.pipeline.trigger_seconds, stop), daemon=True)
    loop.start()
    try:
        warm = warm_up(job, s, events=1000)
        since_ms, began = int(time.time() * 1000), time.monotonic()
        # Several producer processes share the rate: one Python process is one core at most.
        n = max(1, math.ceil(rate / PRODUCER_RATE))
        producers = [subprocess.Popen(
            [sys.executable, "-m", "lab.bench.rate_producer", "--rate", str(rate / n), "--duration", str(seconds),
             "--topic", topic], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(n)]
        samples = []
        while any(p.poll() is None for p in producers):
            samples.append((time.monotonic() - began, committed_total(job, topic)))
            time.sleep(0.5)
        loaded = time.monotonic() - began
        samples.append((loaded, committed_total(job, topic)))
        outputs = [p.communicate()[0] for p in producers]
        sent = sum(int(out.split()[1].replace(",", "")) for out in outputs if out.startswith("produced"))
        deadline = time.monotonic() + max(60.0, seconds)
        while committed_total(job, topic) < warm.sent + sent and time.monotonic() < deadline:
            time.sleep(0.5)
        drain = time.monotonic() - began - loaded
    finally:
        stop.set()
        loop.join(120)
        job.close()
    fresh = freshness.clicks(spark, s.catalog.clicks_table, since_ms)
    discard(s, [s.catalog.clicks_table, s.catalog.dead_letter_table], [])  # the topic: after the catch-up reads it
    step = Step(rate, sent / loaded if loaded else 0.0, commit_rate(samples), fresh.p95_s, drain, topic)
    progress(f"{rate:,.0f} events/s: produced {step.produced_eps:,.0f}/s, committed {step.sustained_eps:,.0f}/s, "
             f"p95 {step.p95_s:.1f} s, {step.drain_s:.1f} s to drain -> {'held' if step.held else 'did not hold'}")
    return step


def catch_up(spark, settings: Settings, topic: str, timeout_s: float = 600.0) -> float:
    """Events/s a fresh job commits reading ``topic`` from the start with nothing producing."""
    s = bench_settings(settings, f"{time.strftime('%Y%m%d%H%M%S')}_catchup", kind="headroom")
    s.kafka.clicks_topic = topic
    total = kafka_clients.records_in_topic(s.kafka.bootstrap, topic)
    job = ClickIngestJob(spark, s)
    stop = threading.Event()
    loop = threading.Thread(target=run_loop, args=(job, s.pipeline.trigger_seconds, stop), daemon=True)
    began = time.monotonic()
    loop.start()
    try:
        while committed_total(job, topic) < total and time.monotonic() - began < timeout_s:
            time.sleep(0.2)
        took = time.monotonic() - began
        done = committed_total(job, topic)
    finally:
        stop.set()
        loop.join(120)
        job.close()
        discard(s, [s.catalog.clicks_table, s.catalog.dead_letter_table], [])
    return done / took if took else 0.0


def run(settings: Settings, rates: list[float], seconds: float, out_dir: Path, progress=print) -> HeadroomResult:
    spark = build_session(settings, "lakehouse-bench-headroom")
    result = HeadroomResult()
    warm_up_topic = None
    try:
        # Not counted: the first seconds at load compile the hot path (JIT); a first step measured
        # them, at p95 4.9 s where the same rate later held 2.6 s.
        progress(f"warming up at {min(rates):,.0f} events/s for {WARM_UP_S:.0f} s (not counted)")
        warm_up_topic = _step(spark, settings, min(rates), WARM_UP_S, lambda _: None).topic
        for rate in sorted(rates):
            result.steps.append(_step(spark, settings, rate, seconds, progress))
            if not result.steps[-1].held:
                break
        progress("the pipeline alone: the last step's topic read again from the start, nothing producing")
        result.catch_up_eps = catch_up(spark, settings, result.steps[-1].topic)
    finally:
        spark.stop()
    progress("measuring the raw ceiling (Kafka -> Parquet, no Spark) on the last step's topic")
    try:
        result.raw_ceiling_eps = raw_ceiling(settings, result.steps[-1].topic, settings.kafka.clicks_partitions,
                                             out_dir)
    finally:
        # ~125 MB a partition at the top steps
        discard(settings, [], [step.topic for step in result.steps] + ([warm_up_topic] if warm_up_topic else []))
    return result
