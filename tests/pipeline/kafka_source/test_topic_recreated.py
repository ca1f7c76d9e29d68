"""A topic that starts a new life is read from its start, not taken for lost data.

A topic deleted and created again (an operator's reset, a migration) starts anew at
offset 0. Offsets committed in the old life are no position in the new log: each commit
records the topic's id beside its offsets, and a changed id means "read from the start".
This test deletes and re-creates the click topic on the real broker between two batches
of a running click job.
"""

from __future__ import annotations

from confluent_kafka import KafkaException
from confluent_kafka.admin import NewTopic
from tenacity import retry, retry_if_exception_type, stop_after_delay, wait_fixed

from deploy.local.services.broker import admin_client
from pipeline.clicks.job import ClickIngestJob
from pipeline.kafka_source.offsets import committed_position
from tests.support.clicks import ClickProducer, drain, rows


def recreate(settings, topic: str) -> None:
    """Delete ``topic`` and create it again once Kafka has finished deleting it (deletion is asynchronous)."""
    admin = admin_client(settings)  # held: a dropped client cancels its own request
    admin.delete_topics([topic], operation_timeout=30)[topic].result()

    @retry(retry=retry_if_exception_type(KafkaException), stop=stop_after_delay(60), wait=wait_fixed(0.5),
           reraise=True)
    def create() -> None:
        admin.create_topics([NewTopic(topic, 3, 1)])[topic].result()

    create()


def test_a_recreated_topic_is_read_from_its_start_exactly_once(spark, click_settings):
    s = click_settings.model_copy(deep=True)
    s.pipeline.on_offsets_expired = "fail"  # a new log must not be mistaken for lost records
    cat, topic = s.catalog, s.kafka.clicks_topic
    job = ClickIngestJob(spark, s)
    try:
        first_life = ClickProducer(s)
        first_life.send(300, bad_share=0.05)
        drain(job)
        before = committed_position(spark, cat.clicks_table)
        assert sum(before.offsets[topic].values()) == 300
        recreate(s, topic)
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
