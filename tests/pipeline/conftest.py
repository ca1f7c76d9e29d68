"""Fixtures for pipeline tests: an isolated topic and tables per test, and a producer."""

from __future__ import annotations

import random
import uuid
from dataclasses import dataclass, field

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import NewTopic

from deploy.local.services.broker import admin_client
from loadgen.events import BAD_KINDS, bad_payload, click_event, encode


@pytest.fixture
def click_settings(settings):
    """Settings whose topic and tables are this test's own."""
    s = settings.model_copy(deep=True)
    suffix = uuid.uuid4().hex[:8]
    s.kafka.clicks_topic = f"clicks_{suffix}"
    s.catalog.clicks_table = f"ods_test.clickevent_{suffix}"
    s.catalog.dead_letter_table = f"ods_test.dead_letter_{suffix}"
    s.catalog.products_table = f"dim_test.products_{suffix}"
    s.catalog.members_table = f"dim_test.members_{suffix}"
    s.pipeline.dimension_refresh_seconds = 0
    admin = admin_client(s)
    admin.create_topics([NewTopic(s.kafka.clicks_topic, 3, 1)])[s.kafka.clicks_topic].result()
    return s


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


@pytest.fixture
def producer(click_settings):
    return ClickProducer(click_settings)
