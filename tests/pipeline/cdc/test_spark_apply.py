"""The CDC apply on Spark: its key state by bucket, its folds, its takeover of tables the Python apply left,
and its state split over two executor processes — on a real MariaDB binlog, broker, metastore and S3."""

from __future__ import annotations

import gc
import os
import re
import time
import urllib.request
import weakref
from dataclasses import replace
from pathlib import Path

import pytest

from lab.bench.cdc import free_port
from lab.peers.cdc_python import PythonApplyJob
from lab.reconcile import trino_rows
from lakehouse.catalog import pyiceberg_catalog
from lakehouse.settings_env import settings_env
from pipeline.cdc.apply import DimensionApplyJob
from pipeline.cdc.buckets import BUCKET_FIELD
from pipeline.cdc.dimension_tables import committed_position
from pipeline.lake_writer.fold import FoldPolicy
from tests.support.cdc import execute, lake_rows, source_rows, start_job, wait_equal
from tests.support.spark_cluster import TWO_EXECUTORS, executors


def _files(s, table: str) -> list:
    loaded = pyiceberg_catalog(s).load_table(table)
    return [task.file for task in loaded.scan().plan_files()] + \
        [d for task in loaded.scan().plan_files() for d in task.delete_files]


def _apply_around(spark, cdc, job, *statements: str) -> None:
    """Until the tables equal the source, then ``statements`` in the source, and again; the job closed after."""
    try:
        wait_equal(spark, cdc, 60, drain=job.run_once)
        execute(cdc, *statements)
        wait_equal(spark, cdc, 60, drain=job.run_once)
    finally:
        job.close()


def test_takes_over_the_tables_and_offsets_the_python_apply_left(spark, cdc, capture, trino):
    """The Python apply applies the snapshot; the Spark apply then partitions the tables by key bucket,
    rewrites their files into the buckets once, and goes on from the offsets the tables hold."""
    _apply_around(spark, cdc, PythonApplyJob(spark, cdc), "UPDATE user_member SET memberLevel = 3 WHERE userid = '555655'",
                  "DELETE FROM products WHERE productId = '4'")
    table = pyiceberg_catalog(cdc).load_table(cdc.catalog.members_table)
    before = committed_position(table).offsets
    assert not table.spec().fields and before
    execute(cdc, "UPDATE user_member SET memberLevel = 5 WHERE userid = '10952'",
            "INSERT INTO products (productId, name, description, product_price) VALUES ('t9', 'n', 'd', 9.5)")
    job = DimensionApplyJob(spark, cdc)
    for name in (cdc.catalog.members_table, cdc.catalog.products_table):
        table = pyiceberg_catalog(cdc).load_table(name)
        assert [f.name for f in table.spec().fields] == [BUCKET_FIELD]
        assert {f.spec_id for f in _files(cdc, name)} == {table.spec().spec_id}  # every file in a bucket
    # taken over, not rebuilt: the offsets are where the Python apply left them
    assert committed_position(pyiceberg_catalog(cdc).load_table(cdc.catalog.members_table)).offsets == before
    _apply_around(spark, cdc, job, "DELETE FROM user_member WHERE userid = '513248'",
                  "UPDATE products SET product_price = 7.25 WHERE productId = '2'")
    assert trino_rows(cdc) == source_rows(cdc) == lake_rows(spark, cdc)
    assert not capture


@pytest.mark.parametrize("shuffle_records", [0, 10**9], ids=["read-stage-and-shuffle", "one-stage"])
def test_a_key_updated_right_after_its_row_was_folded_into_another_file(spark, cdc, capture, trino, shuffle_records):
    """Folds every two batches: rows move between files inside their bucket, and each bucket's index follows
    them, so an update of a moved row replaces it (a stale index would leave the old row alive). Every batch
    read by a stage of its own and shuffled to the buckets' tasks, or read whole by each bucket's task."""
    cdc = cdc.model_copy(update={"pipeline": cdc.pipeline.model_copy(update={"cdc_shuffle_records": shuffle_records})})
    job = DimensionApplyJob(spark, cdc)
    job.policy = FoldPolicy(fold_files=2, tier_fan_in=2, rewrite_deleted_share=0.0)
    job.recover()
    try:
        wait_equal(spark, cdc, 60, drain=job.run_once)
        first = weakref.ref(job.state)
        folded = 0
        for level in range(1, 9):
            execute(cdc, f"UPDATE user_member SET memberLevel = {level}",
                    f"UPDATE products SET product_price = {level}.5")
            before = {f.file_path for f in _files(cdc, cdc.catalog.members_table)}
            wait_equal(spark, cdc, 60, drain=job.run_once)
            after = {f.file_path for f in _files(cdc, cdc.catalog.members_table)}
            folded += bool(before - after)  # a file left the table: a fold moved its rows
        assert folded >= 2
        gc.collect()
        assert first() is None, "the driver lets an applied batch's state go (no RDD lineage kept batch to batch)"
    finally:
        job.close()
    assert trino_rows(cdc) == source_rows(cdc) == lake_rows(spark, cdc)
    files = _files(cdc, cdc.catalog.members_table)
    buckets = {f.partition[0] for f in files}
    assert len(buckets) > 1 and all(0 <= b < cdc.pipeline.cdc_buckets for b in buckets)
    assert not capture


def _held_files(spark) -> list:
    """The apply's state files on the local executor's disk: under the block manager's local folder, which Spark
    gives its Python workers as SPARK_LOCAL_DIRS (local mode: the driver's own)."""
    env = spark.sparkContext._jvm.org.apache.spark.SparkEnv.get()
    local = env.blockManager().diskBlockManager().localDirs()[0].getPath()
    return sorted((Path(local) / "cdc-state").glob("*/state.pkl"))


def test_a_task_that_does_not_find_its_key_state_makes_the_apply_build_it_again(spark, cdc, capture, trino, caplog):
    """The key state lives between batches in files on the executor's disk, one version a batch. A state that is
    gone (an executor's disk lost) or of another version than the batch starts from (a batch failed after its tasks
    changed it) is never used: the apply builds the state again from the tables and runs the batch once more, and
    no change is lost or applied twice."""
    job = DimensionApplyJob(spark, cdc)
    try:
        wait_equal(spark, cdc, 60, drain=job.run_once)
        held = _held_files(spark)
        assert held, "the apply keeps no state on the executor's disk"
        held[0].unlink()  # the state gone
        execute(cdc, "UPDATE user_member SET memberLevel = memberLevel + 1 WHERE userid < '2'",
                "DELETE FROM products WHERE productId = '3'")
        with caplog.at_level("WARNING", logger="pipeline.cdc.apply"):
            wait_equal(spark, cdc, 60, drain=job.run_once)
        assert "building the key state again" in caplog.text
        caplog.clear()
        assert job.state is not None
        job.state = job.state.map(lambda h: replace(h, version=h.version - 1))  # the state a batch ago
        execute(cdc, "UPDATE user_member SET memberLevel = memberLevel + 1 WHERE userid < '3'",
                "INSERT INTO products (productId, name, description, product_price) VALUES ('h1', 'n', 'd', 1.5)")
        with caplog.at_level("WARNING", logger="pipeline.cdc.apply"):
            wait_equal(spark, cdc, 60, drain=job.run_once)
        assert re.search(r"is version (\d+), not (\d+)", caplog.text), caplog.text
    finally:
        job.close()
    assert trino_rows(cdc) == source_rows(cdc) == lake_rows(spark, cdc)
    assert not capture


def _buckets(s, table: str) -> int:
    return pyiceberg_catalog(s).load_table(table).spec().fields[0].transform.num_buckets


def test_a_bucketed_table_keeps_its_bucket_count_and_tables_may_differ(spark, cdc, capture, trino):
    """The apply partitions a table it finds unpartitioned with pipeline.cdc_buckets, and leaves a table already
    bucketed as it is: here products in one bucket, members in three, applied side by side; restarted with
    another setting, both keep theirs."""
    three = cdc.model_copy(update={"pipeline": cdc.pipeline.model_copy(update={"cdc_buckets": 3})})
    one = cdc.model_copy(update={"pipeline": cdc.pipeline.model_copy(update={"cdc_buckets": 1})})
    DimensionApplyJob(spark, one).close()  # the tables made and partitioned by bucket(1)
    members = pyiceberg_catalog(cdc).load_table(cdc.catalog.members_table)
    with members.update_spec() as spec:  # members re-partitioned by hand, as an operator might
        spec.remove_field(BUCKET_FIELD)
    _apply_around(spark, three, DimensionApplyJob(spark, three), "UPDATE user_member SET memberLevel = 4",
                  "UPDATE products SET product_price = 3.5")
    assert (_buckets(cdc, cdc.catalog.products_table), _buckets(cdc, cdc.catalog.members_table)) == (1, 3)
    assert {f.partition[0] for f in _files(cdc, cdc.catalog.members_table)} == {0, 1, 2}
    _apply_around(spark, cdc, DimensionApplyJob(spark, cdc), "DELETE FROM user_member WHERE userid = '513248'",
                  "UPDATE products SET product_price = 7.25 WHERE productId = '2'", "UPDATE user_member SET memberLevel = 2")
    assert (_buckets(cdc, cdc.catalog.products_table), _buckets(cdc, cdc.catalog.members_table)) == (1, 3)
    assert trino_rows(cdc) == source_rows(cdc) == lake_rows(spark, cdc)
    assert not capture


def _gauges(port: int, name: str) -> dict[str, float]:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    return {labels: float(value) for labels, value in re.findall(rf"^{name}\{{(.*)\}} (\S+)$", text, re.M)}


def test_the_key_state_is_split_over_two_executors_and_survives_losing_one(spark, cdc, capture, trino, tmp_path):
    """`lakehouse run dims` with two executor processes: Spark's block managers report how much of the cached key
    state each executor holds, and neither holds more than 60 % of it. Then one executor is killed (SIGKILL) with
    its share of the state: the batch fails, the state is read again from the tables, and the changes made
    meanwhile arrive, none lost, none twice."""
    rows = [", ".join(f"('s{i}-{j}', 'n', 1)" for j in range(500)) for i in range(20)]
    execute(cdc, *[f"INSERT INTO user_member (userid, name, memberLevel) VALUES {values}" for values in rows])
    port = free_port(cdc.metrics.host)
    env = {**os.environ, **settings_env(cdc, with_secrets=True), "LAKEHOUSE_METRICS__PIPELINE_PORT": str(port),
           "SPARK_MASTER": TWO_EXECUTORS}
    process = start_job("dims", env, (tmp_path / "dims.log").open("ab"))
    try:
        wait_equal(spark, cdc, 240)
        deadline = time.monotonic() + 60
        held: dict[str, float] = {}
        while time.monotonic() < deadline:
            held = {k: v for k, v in _gauges(port, "lakehouse_cdc_state_executor_bytes").items() if v > 0}
            if len(held) == 2:
                break
            time.sleep(1)
        assert len(held) == 2, f"the state is held by {held}, not by two executors ({(tmp_path / 'dims.log')})"
        total = sum(held.values())
        assert all(v <= 0.6 * total for v in held.values()), held
        keys = _gauges(port, "lakehouse_cdc_state_keys")
        assert sum(v for k, v in keys.items() if cdc.catalog.members_table in k) == len(source_rows(cdc)["user_member"])
        victim = executors(process.pid)[0]
        victim.kill()
        execute(cdc, "UPDATE user_member SET memberLevel = memberLevel + 1 WHERE userid LIKE 's1-%'",
                "DELETE FROM user_member WHERE userid LIKE 's2-%'",
                "INSERT INTO products (productId, name, description, product_price) VALUES ('x7', 'n', 'd', 7.5)")
        wait_equal(spark, cdc, 240)
        assert victim.pid not in {e.pid for e in executors(process.pid)}  # applied by the executors there are now
        assert trino_rows(cdc) == source_rows(cdc)
    finally:
        process.terminate()
        process.wait(60)
    assert not capture

