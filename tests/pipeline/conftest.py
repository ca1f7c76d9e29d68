"""Fixtures for pipeline tests: an isolated topic and tables per test, and a producer."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka.admin import NewTopic

from deploy.local.services.broker import admin_client
from tests.support.clicks import ClickProducer


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


@pytest.fixture
def producer(click_settings):
    return ClickProducer(click_settings)
