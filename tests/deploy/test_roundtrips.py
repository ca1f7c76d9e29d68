"""A real round trip through each service of the stack."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import Producer

from deploy.local.services.object_store import s3_client
from lakehouse.source_database import connect as mariadb_connect
from tests.support.kafka import consume_all


def test_topics_were_created_with_partitions_from_settings(settings):
    from deploy.local.services.broker import admin_client

    meta = admin_client(settings).list_topics(timeout=10)
    for name, partitions in settings.topics().items():
        assert name in meta.topics
        assert len(meta.topics[name].partitions) == partitions


def test_kafka_produce_then_consume(settings):
    from confluent_kafka.admin import NewTopic

    from deploy.local.services.broker import admin_client

    topic = f"roundtrip-{uuid.uuid4().hex[:8]}"
    admin = admin_client(settings)
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result()
    producer = Producer({"bootstrap.servers": settings.kafka.bootstrap, "linger.ms": 5, "log_level": 0})
    sent = {f"msg-{i}".encode() for i in range(500)}
    for value in sent:
        producer.produce(topic, value)
    assert producer.flush(15) == 0
    assert set(consume_all(settings, topic, 2)) == sent


def test_s3_put_then_get(settings):
    client = s3_client(settings)
    key = f"roundtrip/{uuid.uuid4().hex}.bin"
    body = uuid.uuid4().bytes * 1000
    client.put_object(Bucket=settings.s3.warehouse_bucket, Key=key, Body=body)
    assert client.get_object(Bucket=settings.s3.warehouse_bucket, Key=key)["Body"].read() == body


def test_iceberg_table_from_spark_is_read_by_pyiceberg_and_duckdb(settings, spark):
    from lakehouse.catalog import pyiceberg_catalog
    from queries.duckdb_engine import DuckDBEngine

    table = f"smoke.roundtrip_{uuid.uuid4().hex[:6]}"
    spark.sql("CREATE NAMESPACE IF NOT EXISTS smoke")
    spark.sql(f"CREATE TABLE {table} (id BIGINT, name STRING) USING iceberg TBLPROPERTIES ('format-version'='2')")
    spark.sql(f"INSERT INTO {table} VALUES (1, 'alpha'), (2, 'beta'), (3, 'gamma')")
    spark.sql(f"DELETE FROM {table} WHERE id = 2")  # a v2 position delete the readers must apply
    expected = [(1, "alpha"), (3, "gamma")]
    assert [tuple(r) for r in spark.sql(f"SELECT * FROM {table} ORDER BY id").collect()] == expected

    arrow = pyiceberg_catalog(settings).load_table(table).scan().to_arrow().sort_by("id")
    assert list(zip(arrow["id"].to_pylist(), arrow["name"].to_pylist())) == expected

    # a table of a user's own, in a schema of its own: found by its plain name, no code knows it
    rows = DuckDBEngine(settings).run(f"SELECT id, name FROM {table} ORDER BY id").to_pylist()
    assert [(r["id"], r["name"]) for r in rows] == expected


def test_mariadb_seed_and_binlog(settings):
    from pymysqlreplication import BinLogStreamReader
    from pymysqlreplication.row_event import WriteRowsEvent

    m = settings.mariadb
    with mariadb_connect(settings, database=m.database) as conn, conn.cursor() as cur:
        cur.execute("SELECT productId, name, product_price FROM products WHERE productId IN "
                    "('1','2','3','4','5','6','7','8','9') ORDER BY productId")
        products = cur.fetchall()
        cur.execute("SELECT userid FROM user_member ORDER BY userid")
        members = {r[0] for r in cur.fetchall()}
        cur.execute("SELECT @@gtid_binlog_pos")
        start_gtid = cur.fetchone()[0]
    assert [p[1] for p in products] == [f"test0{i}" for i in range(1, 10)]
    assert str(products[0][2]) == "1.1000"
    assert {"513248", "10952", "555655", "795098", "603670"} <= members  # other tests may add members

    marker = uuid.uuid4().hex[:12]
    with mariadb_connect(settings, user=m.app_user, database=m.database) as conn, conn.cursor() as cur:
        cur.execute("INSERT INTO products (productId, name, description, product_price) VALUES (%s, %s, 'x', 1.2345)",
                    (marker, f"bin-{marker}"))

    stream = BinLogStreamReader(
        connection_settings={"host": m.host, "port": m.port, "user": m.cdc_user,
                             "password": m.cdc_password.get_secret_value()},
        server_id=4242, is_mariadb=True, auto_position=start_gtid or None, blocking=False,
        only_events=[WriteRowsEvent], only_schemas=[m.database],
    )
    try:
        rows = [row["values"] for event in stream for row in event.rows]
    finally:
        stream.close()
    ours = [r for r in rows if r.get("productId") == marker]
    assert len(ours) == 1
    assert str(ours[0]["product_price"]) == "1.2345"


@pytest.mark.parametrize("service", ["kafka", "s3", "postgres", "metastore", "mariadb", "prometheus", "query"])
def test_listed_in_status(stack, service):
    assert service in {r.service for r in stack.status() if r.ready}
