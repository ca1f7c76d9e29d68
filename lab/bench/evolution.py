"""`lakehouse bench evolution`: what the batch that changes the click table's schema costs.

On a topic and tables of its own, the click job commits a few usual batches, then one whose
events carry a new field (the evolving batch: a failed Spark job, a driver-side read and one
PyIceberg commit), then the batches after it (the first compiles the new schema). Each batch
is ``batch_events`` events with 1 % bad ones, produced before the batch runs, so the figures
are the batches' own wall times.
"""

from __future__ import annotations

import random
import statistics
import time
import uuid
from dataclasses import asdict, dataclass

from confluent_kafka.admin import NewTopic

from deploy.local.services.broker import admin_client
from lakehouse import kafka_clients
from lakehouse.settings import Settings
from loadgen.events import bad_payload, click_event, encode
from pipeline.clicks.job import ClickIngestJob
from pipeline.spark_session import build_session


@dataclass
class EvolutionBenchResult:
    batch_events: int
    usual_s: float  # median of the usual batches before the change
    evolving_s: float
    next_s: float  # the first batch after it
    settled_s: float  # median of the batches after that

    def as_dict(self) -> dict:
        return asdict(self)


def run(settings: Settings, batch_events: int = 10_000, usual: int = 3, after: int = 3,
        progress=print) -> EvolutionBenchResult:


    s = settings.model_copy(deep=True)
    suffix = uuid.uuid4().hex[:8]
    s.kafka.clicks_topic = f"bench_evolution_{suffix}"
    s.catalog.clicks_table = f"bench.clickevent_evolution_{suffix}"
    s.catalog.dead_letter_table = f"bench.dead_letter_evolution_{suffix}"
    admin = admin_client(s)
    admin.create_topics([NewTopic(s.kafka.clicks_topic, s.kafka.clicks_partitions, 1)])[s.kafka.clicks_topic].result()
    producer = kafka_clients.producer(s.kafka.bootstrap, 20)
    rng = random.Random(17)

    def batch(**fields) -> float:
        for i in range(batch_events):
            payload = bad_payload(rng)[1] if i % 100 == 0 else encode({**click_event(rng), **fields})
            producer.produce(s.kafka.clicks_topic, payload)
            producer.poll(0)
        producer.flush(60)
        began = time.monotonic()
        job.run_once()
        return time.monotonic() - began

    spark = build_session(s, "lakehouse-bench-evolution")
    job = ClickIngestJob(spark, s)
    try:
        progress("warming up (the first batch starts the JVM and the Python workers)")
        batch()
        usual_s = statistics.median(batch() for _ in range(usual))
        progress(f"usual batch {usual_s:.2f} s; now events carrying deviceType and appVersion")
        evolving_s = batch(deviceType="ios", appVersion=7)
        after_s = [batch(deviceType="ios", appVersion=7) for _ in range(after + 1)]
    finally:
        job.close()
        spark.stop()
    return EvolutionBenchResult(batch_events, usual_s, evolving_s, after_s[0], statistics.median(after_s[1:]))
