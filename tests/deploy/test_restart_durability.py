"""Restarting any service keeps its data: topics, objects, catalog tables, rows."""

from __future__ import annotations

import uuid

from confluent_kafka import Producer
from confluent_kafka.admin import NewTopic
from tenacity import retry, stop_after_delay, wait_fixed

from deploy.local.services.broker import admin_client
from deploy.local.services.object_store import s3_client
from lakehouse.catalog import pyiceberg_catalog
from lakehouse.source_database import connect as mariadb_connect
from tests.support.kafka import consume_all


def test_broker_restart_keeps_topic_contents(stack, settings):
    topic = f"durable-{uuid.uuid4().hex[:8]}"
    admin = admin_client(settings)
    admin.create_topics([NewTopic(topic, 3, 1)])[topic].result()
    producer = Producer({"bootstrap.servers": settings.kafka.bootstrap, "linger.ms": 5, "log_level": 0})
    sent = {f"durable-{i}".encode() for i in range(300)}
    for value in sent:
        producer.produce(topic, value)
    assert producer.flush(15) == 0
    stack.restart("kafka")
    assert set(consume_all(settings, topic, 3)) == sent


def test_s3_restart_keeps_objects(stack, settings):
    key = f"durable/{uuid.uuid4().hex}"
    s3_client(settings).put_object(Bucket=settings.s3.warehouse_bucket, Key=key, Body=b"kept")
    stack.restart("s3")
    assert s3_client(settings).get_object(Bucket=settings.s3.warehouse_bucket, Key=key)["Body"].read() == b"kept"


def test_catalog_restart_keeps_tables(stack, settings, spark):
    table = f"smoke.durable_{uuid.uuid4().hex[:6]}"
    spark.sql("CREATE NAMESPACE IF NOT EXISTS smoke")
    spark.sql(f"CREATE TABLE {table} (id BIGINT) USING iceberg")
    spark.sql(f"INSERT INTO {table} VALUES (7), (8)")
    stack.restart("postgres")
    stack.restart("metastore")

    @retry(stop=stop_after_delay(30), wait=wait_fixed(1), reraise=True)
    def read_ids():
        return sorted(pyiceberg_catalog(settings).load_table(table).scan().to_arrow()["id"].to_pylist())

    assert read_ids() == [7, 8]
    assert sorted(r.id for r in spark.sql(f"SELECT id FROM {table}").collect()) == [7, 8]


def test_mariadb_restart_keeps_rows(stack, settings):
    key = uuid.uuid4().hex[:10]
    db = settings.mariadb.database
    with mariadb_connect(settings, database=db) as conn, conn.cursor() as cur:
        cur.execute("INSERT INTO user_member (userid, name, memberLevel) VALUES (%s, 'durable', 5)", (key,))
    stack.restart("mariadb")
    with mariadb_connect(settings, database=db) as conn, conn.cursor() as cur:
        cur.execute("SELECT name, memberLevel FROM user_member WHERE userid = %s", (key,))
        assert cur.fetchone() == ("durable", 5)
