"""What the chaos suite measures: recovery, and exactly-once against the ground truth.

Recovery after a fault = the moment the system has caught up with everything that
happened before the fault ended: the click table's committed offsets reach the topic's
end offsets taken at that moment, and a heartbeat row written to the source database
at that moment is visible in the Iceberg product dimension (so capture and apply both
work again).
"""

from __future__ import annotations

import json
import time
from decimal import Decimal

from confluent_kafka import TopicPartition

from lakehouse import kafka_clients
from lakehouse.errors import LakehouseError
from lakehouse.settings import Settings
from lakehouse.source_database import connect as mariadb_connect
from pipeline.kafka_source.offsets import committed_offsets

HEARTBEAT_ID = "chaos-heartbeat"


def end_offsets(s: Settings, topic: str) -> dict[int, int]:
    """The topic's high watermark per partition, straight from the broker."""
    consumer = kafka_clients.reader(s.kafka.bootstrap, "chaos-checks", log_level=kafka_clients.SILENT)
    try:
        meta = consumer.list_topics(topic, timeout=10)
        return {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10, cached=False)[1]
                for p in meta.topics[topic].partitions}
    finally:
        consumer.close()


def write_heartbeat(s: Settings) -> str:
    """Change the heartbeat product's name in the source database; returns the new name."""
    name = f"hb-{time.time_ns()}"
    with mariadb_connect(s, user=s.mariadb.app_user, database=s.mariadb.database) as conn, conn.cursor() as cur:
        cur.execute("INSERT INTO products (productId, name, description, product_price) VALUES (%s, %s, %s, %s) "
                    "ON DUPLICATE KEY UPDATE name = VALUES(name)", (HEARTBEAT_ID, name, "chaos heartbeat",
                                                                    Decimal("1.00")))
    return name


def heartbeat_visible(spark, s: Settings, name: str) -> bool:
    if not spark.catalog.tableExists(s.catalog.products_table):
        return False
    row = spark.sql(f"SELECT name FROM {s.catalog.products_table} WHERE productId = '{HEARTBEAT_ID}'").first()
    return row is not None and row.name == name


def clicks_caught_up(spark, s: Settings, ends: dict[int, int]) -> bool:
    if not spark.catalog.tableExists(s.catalog.clicks_table):
        return False
    committed = committed_offsets(spark, s.catalog.clicks_table).get(s.kafka.clicks_topic, {})
    return bool(committed) and all(committed.get(p, 0) >= end for p, end in ends.items())


def caught_up_marker(s: Settings) -> tuple[dict[int, int], str]:
    """Take the marker of 'now': the click topic's end offsets and a fresh heartbeat (retried while the
    broker or database are still coming back)."""
    last: Exception | None = None
    for _ in range(60):
        try:
            return end_offsets(s, s.kafka.clicks_topic), write_heartbeat(s)
        except Exception as exc:  # noqa: BLE001 - a service is still restarting
            last = exc
            time.sleep(2)
    raise LakehouseError(f"could not take the recovery marker: {last}")


def wait_caught_up(spark, s: Settings, marker: tuple[dict[int, int], str], timeout: float) -> float | None:
    """Seconds until both the clicks and the heartbeat are through; None if ``timeout`` passed first."""
    ends, name = marker
    began = time.monotonic()
    while time.monotonic() - began < timeout:
        try:
            if clicks_caught_up(spark, s, ends) and heartbeat_visible(spark, s, name):
                return time.monotonic() - began
        except Exception:  # noqa: BLE001 - the catalog or S3 may still be coming back
            pass
        time.sleep(2.0)
    return None


def click_id_counts(spark, s: Settings) -> dict[str, int]:
    """eventId -> how many rows the click table holds for it."""
    rows = spark.sql(f"SELECT event_id, count(*) AS n FROM {s.catalog.clicks_table} GROUP BY event_id").collect()
    return {r.event_id: r.n for r in rows}


def dead_letter_event_ids(spark, s: Settings) -> set[str]:
    """eventIds found in the raw payloads of the dead-letter table (where they parse)."""
    ids = set()
    for row in spark.table(s.catalog.dead_letter_table).select("raw").collect():
        try:
            ids.add(json.loads(bytes(row.raw))["eventId"])
        except (ValueError, KeyError, TypeError):
            continue
    return ids


def aggregate_gaps(spark, s: Settings) -> dict[str, tuple[int, int]]:
    """productId -> (clicks, views in the live aggregates), for products where the two differ."""
    clicks = {r.productId: r.n for r in spark.sql(
        f"SELECT productId, count(*) AS n FROM {s.catalog.clicks_table} GROUP BY 1").collect()}
    if not spark.catalog.tableExists(s.catalog.product_views_table):
        return {p: (n, 0) for p, n in clicks.items()}
    views = {r.productId: r.n for r in spark.sql(
        f"SELECT productId, sum(views) AS n FROM {s.catalog.product_views_table} GROUP BY 1").collect()}
    return {p: (clicks.get(p, 0), views.get(p, 0)) for p in set(clicks) | set(views)
            if clicks.get(p, 0) != views.get(p, 0)}
