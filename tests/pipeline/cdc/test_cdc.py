"""CDC on a real MariaDB binlog, broker, Spark and metastore."""

from __future__ import annotations

import json
import threading
import time

import pytest

from deploy.local.services.mariadb import connect as mariadb_connect
from lab.reconcile import trino_rows
from pipeline.capture.checkpoints import read_checkpoint
from pipeline.capture.connector import Capture
from pipeline.capture.ddl import SchemaChangeError
from pipeline.cdc.apply import DimensionApplyJob
from tests.support.cdc import execute, lake_rows, source_rows, wait_equal
from tests.support.kafka import consume_all


def test_snapshot_then_seed_scenario_visible_within_seconds(spark, cdc, capture):
    job = DimensionApplyJob(spark, cdc)
    try:
        wait_equal(spark, cdc, 60, drain=job.run_once)
        seed = lake_rows(spark, cdc)
        assert [r[1] for r in seed["products"]] == [f"test0{i}" for i in range(1, 10)]
        assert {r[0] for r in seed["user_member"]} == {"513248", "10952", "555655", "795098", "603670"}
        execute(cdc, "UPDATE user_member SET memberLevel = 2 WHERE userid = '555655'",
                "UPDATE products SET description = 'test666', product_price = 8.1 WHERE productId = '1'")
        wait_equal(spark, cdc, 30, drain=job.run_once)  # how fast: `bench cdc` measures it, a test does not
        rows = {r[0]: r for r in lake_rows(spark, cdc)["products"]}
        assert rows["1"][2:4] == ("test666", "8.1000")
        members = {r[0]: r for r in lake_rows(spark, cdc)["user_member"]}
        assert members["555655"][3] == 2
    finally:
        job.close()
    assert not capture


def test_every_reader_sees_the_source_after_upserts_and_deletes(spark, cdc, capture, trino):
    """Inserts, updates, deletes, a key deleted and inserted again in one transaction and across two:
    Spark and Trino (through the shared metastore) both return exactly the MariaDB state."""
    job = DimensionApplyJob(spark, cdc)
    try:
        wait_equal(spark, cdc, 60, drain=job.run_once)
        execute(cdc, "INSERT INTO products (productId, name, description, product_price) VALUES ('t1', 'a', 'b', 1.5)",
                "UPDATE products SET product_price = 2.25 WHERE productId = '2'",
                "DELETE FROM products WHERE productId = '3'",
                "UPDATE user_member SET memberLevel = 4 WHERE userid = '10952'",
                "DELETE FROM user_member WHERE userid = '513248'")
        wait_equal(spark, cdc, 60, drain=job.run_once)
        execute(cdc, "BEGIN", "DELETE FROM products WHERE productId = 't1'",
                "INSERT INTO products (productId, name, description, product_price) VALUES ('t1', 'again', 'c', 3)",
                "COMMIT")
        execute(cdc, "INSERT INTO user_member (userid, name, memberLevel) VALUES ('513248', 'back', 1)")
        wait_equal(spark, cdc, 60, drain=job.run_once)
    finally:
        job.close()
    source = source_rows(cdc)
    assert trino_rows(cdc) == source == lake_rows(spark, cdc)
    # each checkpoint also says where the lake stands in the source's own GTID terms
    with mariadb_connect(cdc) as conn, conn.cursor() as cur:
        cur.execute("SELECT @@GLOBAL.gtid_binlog_pos")
        binlog_pos = cur.fetchone()[0]
    deadline = time.monotonic() + 30
    while (read_checkpoint(cdc) or {}).get("gtid_set") != binlog_pos and time.monotonic() < deadline:
        time.sleep(0.3)
    assert read_checkpoint(cdc)["gtid_set"] == binlog_pos
    assert {r[0]: r[1] for r in source["products"]}["t1"] == "again" and "3" not in {r[0] for r in source["products"]}
    assert not capture


def test_envelopes_conform_for_every_op(spark, cdc, capture):
    execute(cdc, "INSERT INTO products (productId, name, description, product_price) VALUES ('x1', 'n', 'd', 1.2345)",
            "UPDATE products SET product_price = 2.5 WHERE productId = 'x1'",
            "DELETE FROM products WHERE productId = 'x1'")
    deadline = time.monotonic() + 30
    records = []
    while time.monotonic() < deadline:
        records = [json.loads(v) for v in consume_all(cdc, cdc.cdc_topic("products"), 1, idle_seconds=1)]
        if {r["op"] for r in records} >= {"r", "c", "u", "d"}:
            break
    by_op = {r["op"]: r for r in records}
    assert set(by_op) == {"r", "c", "u", "d"}
    for op, record in by_op.items():
        assert set(record) == {"before", "after", "source", "op", "ts_ms", "transaction"}
        src = record["source"]
        assert set(src) >= {"version", "connector", "name", "ts_ms", "snapshot", "db", "table", "server_id", "gtid",
                            "file", "pos", "row"}
        assert src["db"] == cdc.mariadb.database and src["table"] == "products" and src["connector"] == "mariadb"
        assert isinstance(src["pos"], int) and isinstance(src["row"], int) and isinstance(src["ts_ms"], int)
        assert isinstance(record["ts_ms"], int) and src["file"].startswith("binlog.")
        assert (record["before"] is None) == (op in ("c", "r"))
        assert (record["after"] is None) == (op == "d")
        if op != "r":
            assert src["snapshot"] == "false" and src["gtid"].count("-") == 2  # MariaDB domain-server-seq
    assert by_op["c"]["after"]["product_price"] == "1.2345"  # exact decimal string
    assert by_op["u"]["before"]["product_price"] == "1.2345" and by_op["u"]["after"]["product_price"] == "2.5000"
    assert by_op["u"]["after"]["update_time"].endswith("Z")
    assert by_op["d"]["before"]["productId"] == "x1"
    assert not capture


def test_changes_during_the_snapshot_are_neither_lost_nor_doubled(spark, cdc):
    stop_writes = threading.Event()

    def write():
        i = 0
        while not stop_writes.is_set():
            execute(cdc, f"INSERT INTO user_member (userid, name, memberLevel) VALUES ('w{i}', 'w', 1)",
                    f"UPDATE products SET product_price = {i % 97 + 1} WHERE productId = '{i % 9 + 1}'")
            i += 1

    writer = threading.Thread(target=write)
    writer.start()
    time.sleep(0.3)
    cap = Capture(cdc)
    snapshot_position = cap.snapshot()
    stop_writes.set()
    writer.join()
    stop = threading.Event()
    streamer = threading.Thread(target=cap.stream, args=(snapshot_position, stop))
    streamer.start()
    job = DimensionApplyJob(spark, cdc)
    try:
        wait_equal(spark, cdc, 60, drain=job.run_once)
    finally:
        stop.set()
        streamer.join(30)
        job.close()
    for table in cdc.cdc_tables:
        records = [json.loads(v) for v in consume_all(cdc, cdc.cdc_topic(table), 1, idle_seconds=1)]
        positions = [(r["source"]["file"], r["source"]["pos"], r["source"]["row"]) for r in records if r["op"] != "r"]
        assert len(positions) == len(set(positions)), "a change was published twice"
        assert all((f, p) > (snapshot_position["file"], snapshot_position["pos"]) for f, p, _ in positions), \
            "a change at or before the snapshot position was streamed again"


def test_ddl_rule_add_column_evolves_other_ddl_stops(cdc, capture):
    execute(cdc, "ALTER TABLE user_member ADD COLUMN nickname VARCHAR(32)", user="root")
    execute(cdc, "INSERT INTO user_member (userid, name, memberLevel, nickname) VALUES ('n1', 'n', 1, 'nick')")
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        records = [json.loads(v) for v in consume_all(cdc, cdc.cdc_topic("user_member"), 1, idle_seconds=1)]
        if any(r["after"] and r["after"].get("nickname") == "nick" for r in records):
            break
    else:
        raise AssertionError("the new column did not appear in the envelopes")
    assert not capture
    execute(cdc, "ALTER TABLE products MODIFY COLUMN product_price DECIMAL(12,2)", user="root")
    deadline = time.monotonic() + 20
    while not capture and time.monotonic() < deadline:
        time.sleep(0.2)
    assert capture and isinstance(capture[0], SchemaChangeError)
    assert "MODIFY COLUMN product_price" in str(capture[0])


def test_missing_topics_are_named_with_the_command_or_created_where_the_settings_say_so(settings):
    """A new prefix (a new database): the capture stops at once naming the topics and how to create them,
    instead of retrying a Kafka error code; with kafka.create_topics it creates them and snapshots."""
    import uuid

    from deploy.local.services.broker import admin_client
    from deploy.local.services.mariadb import create_source_database
    from lakehouse.kafka_clients import missing_topics
    from pipeline.capture.connector import MissingTopics

    s = settings.model_copy(deep=True)
    suffix = uuid.uuid4().hex[:8]
    s.mariadb.database, s.kafka.cdc_topic_prefix = f"shop_{suffix}", f"cdc_new_{suffix}"
    create_source_database(s, s.mariadb.database)
    needed = [s.cdc_position_topic, *(s.cdc_topic(t) for t in s.cdc_tables)]
    stop = threading.Event()
    began = time.monotonic()
    with pytest.raises(MissingTopics, match=f"{s.cdc_position_topic}.*lakehouse stack up.*CREATE_TOPICS=true"):
        Capture(s).run(stop)
    assert time.monotonic() - began < 30 and missing_topics(admin_client(s), needed) == needed
    s.kafka.create_topics = True
    thread = threading.Thread(target=Capture(s).run, args=(stop,), daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 60
        while missing_topics(admin_client(s), needed) or read_checkpoint(s) is None:  # created, then snapshotted
            assert time.monotonic() < deadline, "no snapshot into the created topics"
            time.sleep(0.2)
        assert len(consume_all(s, s.cdc_topic("products"), 1)) == 9  # the seed's products, snapshotted
    finally:
        stop.set()
        thread.join(30)
