"""A topic that starts a new life is read from its start, not taken for lost data.

The local broker's default engine keeps topics in memory, so a broker restart starts
every topic anew at offset 0 (docs/local-stack.md, 'Broker durability'); a topic deleted and created
again is the same event on any Kafka. Offsets committed in the old life are no position
in the new log: each commit records the topic's id beside its offsets, and a changed id
means "read from the start". This test restarts a private in-memory broker under a
running click job (the suite's own stack keeps its broker on the durable engine).
"""

from __future__ import annotations

import subprocess
import time
from contextlib import contextmanager

from confluent_kafka.admin import NewTopic

from deploy.local.processes import free_port
from deploy.local.services.broker import Broker, admin_client
from pipeline.clicks.job import ClickIngestJob
from pipeline.kafka_source.offsets import committed_position
from tests.pipeline.conftest import ClickProducer
from tests.pipeline.test_click_ingest import drain, rows


@contextmanager
def memory_broker(settings, log_path):
    """Tansu on its memory engine at ``settings.kafka.port``, with the click topic created."""
    broker = Broker(settings)
    with log_path.open("ab") as log:
        process = subprocess.Popen(broker.command(), stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 30
        while not broker.ready():
            assert process.poll() is None and time.monotonic() < deadline, f"no broker: see {log_path}"
            time.sleep(0.2)
        topic = settings.kafka.clicks_topic
        admin = admin_client(settings)  # held: a dropped client cancels its own request
        admin.create_topics([NewTopic(topic, 3, 1)])[topic].result()
        yield
    finally:
        process.kill()
        process.wait(10)


def test_a_restarted_in_memory_broker_is_read_from_its_start_exactly_once(spark, click_settings, tmp_path):
    s = click_settings.model_copy(deep=True)
    s.kafka.port, s.kafka.storage = free_port(s.kafka.host), "memory"
    s.pipeline.on_offsets_expired = "fail"  # a new log must not be mistaken for lost records
    cat, topic = s.catalog, s.kafka.clicks_topic
    with memory_broker(s, tmp_path / "broker.log"):
        job = ClickIngestJob(spark, s)
        first_life = ClickProducer(s)
        first_life.send(300, bad_share=0.05)
        drain(job)
    before = committed_position(spark, cat.clicks_table)
    assert sum(before.offsets[topic].values()) == 300
    try:
        with memory_broker(s, tmp_path / "broker.log"):
            second_life = ClickProducer(s, seed=11)
            second_life.send(120, bad_share=0.1)  # fewer than before: every offset is below the old ones
            assert drain(job) >= 1
    finally:
        job.close()

    after = committed_position(spark, cat.clicks_table)
    assert after.topic_ids[topic] != before.topic_ids[topic]
    assert sum(after.offsets[topic].values()) == 120
    ids = [r.event_id for r in rows(spark, cat.clicks_table)]
    expected = set(first_life.sent.valid) | set(second_life.sent.valid)
    assert len(ids) == len(set(ids)) == len(expected), "every valid event once, from both lives of the topic"
    assert set(ids) == expected
    raw = [bytes(r.raw) for r in rows(spark, cat.dead_letter_table)]
    assert sorted(raw) == sorted([*first_life.sent.bad, *second_life.sent.bad]), \
        "the new life's bad events are dead-lettered too, though their offsets are below the old dead letters'"
