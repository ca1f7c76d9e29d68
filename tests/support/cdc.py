"""Helpers for CDC tests: an isolated source database, topics and dimension tables."""

from __future__ import annotations

import uuid

from confluent_kafka.admin import NewTopic

from deploy.local.services.broker import admin_client
from deploy.local.services.mariadb import create_source_database
from lab.reconcile import checksum, lake_rows, source_rows  # noqa: F401 - the CDC tests' helpers
from lab.reconcile import wait_until_equal as wait_equal  # noqa: F401


def isolated_cdc_settings(settings):
    """Settings with this test's own database, CDC topics and dimension tables (seeded like `shop`)."""
    s = settings.model_copy(deep=True)
    suffix = uuid.uuid4().hex[:8]
    s.mariadb.database = f"shop_{suffix}"
    s.kafka.cdc_topic_prefix = f"cdc_{suffix}"
    s.catalog.products_table = f"dim_test.products_{suffix}"
    s.catalog.members_table = f"dim_test.members_{suffix}"
    create_source_database(s, s.mariadb.database)
    admin = admin_client(s)
    topics = [NewTopic(s.cdc_topic(t), 1, 1) for t in s.cdc_tables] + [NewTopic(s.cdc_position_topic, 1, 1),
                                                                        NewTopic(s.cdc_schema_topic, 1, 1)]
    for future in admin.create_topics(topics).values():
        future.result()
    return s
