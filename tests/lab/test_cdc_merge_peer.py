"""The MERGE INTO peer of the CDC apply, on a real binlog, broker, Spark, metastore and Trino: it must be right
before its figures mean anything."""

from __future__ import annotations

import threading
import time

from deploy.local.services.mariadb import connect as mariadb_connect
from lab.peers.cdc_merge import MergeApplyJob
from lab.reconcile import trino_rows
from lakehouse.kafka_clients import end_offsets
from pipeline.capture.checkpoints import read_checkpoint
from pipeline.capture.connector import Capture
from pipeline.kafka_source import offsets as kafka_offsets
from tests.support.cdc import isolated_cdc_settings, lake_rows, source_rows, wait_equal


def _execute(s, *statements):
    with mariadb_connect(s, user=s.mariadb.app_user, database=s.mariadb.database) as conn, conn.cursor() as cur:
        for sql in statements:
            cur.execute(sql)


def test_merge_peer_leaves_every_reader_equal_to_the_source_with_offsets_in_its_snapshots(spark, settings, trino):
    cdc = isolated_cdc_settings(settings)
    stop, errors = threading.Event(), []
    capture = Capture(cdc)
    thread = threading.Thread(target=lambda: _run(capture, stop, errors), daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while read_checkpoint(cdc) is None:
        assert time.monotonic() < deadline and not errors, errors
        time.sleep(0.2)
    job = MergeApplyJob(spark, cdc)
    try:
        wait_equal(spark, cdc, 60, drain=job.run_once)
        _execute(cdc, "INSERT INTO products (productId, name, description, product_price) VALUES ('m1', 'a', 'b', 1.5)",
                 "UPDATE products SET product_price = 2.25 WHERE productId = '2'",
                 "UPDATE products SET product_price = 3.5 WHERE productId = '2'",
                 "DELETE FROM products WHERE productId = '3'",
                 "UPDATE user_member SET memberLevel = 4 WHERE userid = '10952'",
                 "DELETE FROM user_member WHERE userid = '513248'")
        _execute(cdc, "BEGIN", "DELETE FROM products WHERE productId = 'm1'",
                 "INSERT INTO products (productId, name, description, product_price) VALUES ('m1', 'again', 'c', 3)",
                 "COMMIT")
        wait_equal(spark, cdc, 60, drain=job.run_once)
    finally:
        job.close()
        stop.set()
        thread.join(30)
    source = source_rows(cdc)
    assert lake_rows(spark, cdc) == source == trino_rows(cdc)
    assert {r[0]: r[1] for r in source["products"]}["m1"] == "again"
    table = f"{cdc.catalog.name}.{cdc.catalog.products_table}"
    committed = kafka_offsets.committed_offsets(spark, table)
    topic = cdc.cdc_topic("products")
    assert committed[topic] == end_offsets(cdc.kafka.bootstrap, topic)  # the MERGE's snapshot holds the offsets it applied up to
    deletes = spark.sql(f"SELECT count(*) FROM {table}.delete_files").first()[0]
    assert deletes > 0, "merge-on-read: the replaced rows are named in delete files, not rewritten"
    assert not errors


def _run(capture, stop, errors):
    try:
        capture.run(stop)
    except BaseException as exc:  # noqa: BLE001 - reported by the test
        errors.append(exc)
