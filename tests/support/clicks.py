"""Click tests' helpers: a producer that remembers what it sent, draining a job, reading a table back."""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field

from confluent_kafka import Producer

from loadgen.events import BAD_KINDS, bad_payload, click_event, encode


@dataclass
class Sent:
    valid: dict[str, dict] = field(default_factory=dict)  # eventId -> event
    bad: dict[bytes, str] = field(default_factory=dict)  # payload -> kind


class ClickProducer:
    def __init__(self, settings, seed: int = 7):
        self.topic = settings.kafka.clicks_topic
        self.rng = random.Random(seed)
        self.producer = Producer({"bootstrap.servers": settings.kafka.bootstrap, "linger.ms": 5, "log_level": 0})
        self.sent = Sent()

    def send(self, n: int, bad_share: float = 0.0, **overrides) -> None:
        for i in range(n):
            if bad_share and self.rng.random() < bad_share:
                kind, payload = bad_payload(self.rng, BAD_KINDS[i % len(BAD_KINDS)])
                self.sent.bad[payload] = kind
                self.producer.produce(self.topic, payload)
            else:
                event = {**click_event(self.rng), **overrides}
                self.sent.valid[event["eventId"]] = event
                self.producer.produce(self.topic, encode(event), key=event["uid"].encode())
            self.producer.poll(0)
        assert self.producer.flush(30) == 0



def assert_rows_are_the_events(clicks: list, sent: Sent, topic: str) -> None:
    """Every valid event sent is one click row, with the event's fields and the pipeline's own columns."""
    assert sorted(r.event_id for r in clicks) == sorted(sent.valid)
    for r in clicks:
        event = sent.valid[r.event_id]
        assert (r.webpageId, r.uid, r.productId, r.cookieId, r.expendTime, r.updateTime) == (
            event["webpageId"], event["uid"], event["productId"], event["cookieId"], event["expendTime"],
            event["updateTime"])
        assert int(r.event_time.timestamp() * 1000) == event["updateTime"]
        assert r.kafka_topic == topic and r.produced_at and r.ingest_time


def drain(job, max_batches: int = 20) -> int:
    """Run batches until one is idle; return how many committed."""
    for n in range(max_batches):
        if job.run_once() == 0:
            return n
    raise AssertionError("the job never went idle")


def rows(spark, table: str) -> list:
    return spark.table(table).collect()



def wait_for(predicate, timeout: float, what: str, log_path=None, every: float = 1.0):
    """Poll until ``predicate`` is truthy; on time-out, show the tail of the job's log."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(every)
    tail = log_path.read_text(errors="replace")[-4000:] if log_path else ""
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}\n{tail}")


def event_ids(spark, table: str) -> list[str]:
    if not spark.catalog.tableExists(table):
        return []
    return [r.event_id for r in spark.table(table).select("event_id").collect()]

