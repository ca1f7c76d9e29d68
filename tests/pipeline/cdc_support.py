"""Helpers for CDC tests: an isolated source database, topics and dimension tables."""

from __future__ import annotations

import hashlib
import time
import uuid

from confluent_kafka.admin import NewTopic

from deploy.local.services.broker import admin_client
from deploy.local.services.mariadb import connect as mariadb_connect
from deploy.local.services.mariadb import create_source_database


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
    topics = [NewTopic(s.cdc_topic(t), 1, 1) for t in s.cdc_tables] + [NewTopic(s.cdc_position_topic, 1, 1)]
    for future in admin.create_topics(topics).values():
        future.result()
    return s


def settings_env(s) -> dict[str, str]:
    return {
        "LAKEHOUSE_MARIADB__DATABASE": s.mariadb.database,
        "LAKEHOUSE_KAFKA__CDC_TOPIC_PREFIX": s.kafka.cdc_topic_prefix,
        "LAKEHOUSE_CATALOG__PRODUCTS_TABLE": s.catalog.products_table,
        "LAKEHOUSE_CATALOG__MEMBERS_TABLE": s.catalog.members_table,
        "LAKEHOUSE_PIPELINE__TRIGGER_SECONDS": "0.5",
    }


def source_rows(s) -> dict[str, list[tuple]]:
    with mariadb_connect(s, database=s.mariadb.database) as conn, conn.cursor() as cur:
        cur.execute("SET time_zone = '+00:00'")
        cur.execute("SELECT productId, name, description, CAST(product_price AS CHAR), "
                    "CAST(ROUND(UNIX_TIMESTAMP(update_time) * 1000) AS SIGNED) FROM products ORDER BY 1")
        products = [tuple(r) for r in cur.fetchall()]
        cur.execute("SELECT userid, name, show_params, memberLevel, "
                    "CAST(ROUND(UNIX_TIMESTAMP(update_time) * 1000) AS SIGNED) FROM user_member ORDER BY 1")
        members = [tuple(r) for r in cur.fetchall()]
    return {"products": products, "user_member": members}


def lake_rows(spark, s) -> dict[str, list[tuple]]:
    products = spark.sql(f"SELECT productId, name, description, CAST(product_price AS STRING), "
                         f"unix_millis(update_time) FROM {s.catalog.products_table} ORDER BY 1").collect()
    members = spark.sql(f"SELECT userid, name, show_params, member_level, unix_millis(update_time) "
                        f"FROM {s.catalog.members_table} ORDER BY 1").collect()
    return {"products": [tuple(r) for r in products], "user_member": [tuple(r) for r in members]}


def checksum(rows: dict[str, list[tuple]]) -> str:
    return hashlib.sha256(repr(sorted(rows.items())).encode()).hexdigest()


def wait_equal(spark, s, timeout: float, drain=None) -> float:
    """Seconds until the Iceberg dimensions equal the source tables (drain() advances the apply)."""
    began = time.monotonic()
    while time.monotonic() - began < timeout:
        if drain:
            drain()
        tables = (s.catalog.products_table, s.catalog.members_table)
        if all(spark.catalog.tableExists(t) for t in tables) and lake_rows(spark, s) == source_rows(s):
            return time.monotonic() - began
        time.sleep(0.3)
    src, lake = source_rows(s), lake_rows(spark, s)
    diff = {t: (set(src[t]) ^ set(lake[t])) for t in src}
    raise AssertionError(f"dimensions differ after {timeout}s: {diff}")


