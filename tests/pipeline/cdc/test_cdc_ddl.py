"""The lake follows the source's routine DDL, and stops on the rest with a way on (issue 44), on a real MariaDB,
broker, metastore and object store: changes flow before, during and after each statement."""

from __future__ import annotations

import json
import threading
import time
import uuid

import pytest
from typer.testing import CliRunner

from cli.main import app
from deploy.local.services.mariadb import connect as mariadb_connect
from lakehouse.catalog import pyiceberg_catalog
from lakehouse.cdc_settings import CapturedTable
from pipeline.capture.checkpoints import read_checkpoint
from pipeline.capture.connector import Capture
from pipeline.capture.ddl import SchemaChangeError
from pipeline.cdc.apply import DimensionApplyJob
from pipeline.cdc.table_evolution import HISTORY_PROPERTY
from pipeline.maintenance.job import MaintenanceJob
from queries.library import render
from tests.support.cdc import isolated_cdc_settings

pytestmark = pytest.mark.stack


def execute(s, *statements, user=None):
    with mariadb_connect(s, user=user or "root", database=s.mariadb.database) as conn, conn.cursor() as cur:
        for sql in statements:
            cur.execute(sql)


def source(s, sql: str) -> list[tuple]:
    with mariadb_connect(s, user="root", database=s.mariadb.database) as conn, conn.cursor() as cur:
        cur.execute(sql)
        return [tuple(r) for r in cur.fetchall()]


class Running:
    """The capture in a thread; ``errors`` holds what stopped it."""

    def __init__(self, s, accept_ddl: str | None = None):
        self.stop, self.errors = threading.Event(), []
        self.thread = threading.Thread(target=self._run, args=(Capture(s, accept_ddl=accept_ddl),), daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 60
        while read_checkpoint(s) is None:
            assert time.monotonic() < deadline and not self.errors, self.errors
            time.sleep(0.2)

    def _run(self, capture):
        try:
            capture.run(self.stop)
        except BaseException as exc:  # noqa: BLE001
            self.errors.append(exc)

    def close(self):
        self.stop.set()
        self.thread.join(30)


def lake(s, table: str, columns: str) -> dict:
    rows = pyiceberg_catalog(s).load_table(table).scan(selected_fields=tuple(columns.split(","))).to_arrow()
    return {r[columns.split(",")[0]]: tuple(r.values())[1:] for r in rows.to_pylist()}


def drain_until(job, check, timeout=60):
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "the lake did not get there"
        job.run_once()
        time.sleep(0.2)


@pytest.fixture
def cdc(settings):
    return isolated_cdc_settings(settings)


def test_a_new_column_reaches_the_lake_in_the_commit_of_the_first_change_that_carries_it(spark, cdc):
    capture = Running(cdc)
    job = DimensionApplyJob(spark, cdc)
    try:
        execute(cdc, "UPDATE user_member SET memberLevel = 7 WHERE userid = '513248'")
        execute(cdc, "ALTER TABLE user_member ADD COLUMN email VARCHAR(128)")
        execute(cdc, "UPDATE user_member SET memberLevel = 8 WHERE userid = '10952'")  # no email yet
        execute(cdc, "INSERT INTO user_member (userid, name, memberLevel, email) VALUES ('e1', 'e', 1, 'e1@x')")
        table = cdc.catalog.members_table
        drain_until(job, lambda: "e1" in lake(cdc, table, "userid,member_level"))
        iceberg = pyiceberg_catalog(cdc).load_table(table)
        assert "email" in iceberg.schema().column_names
        rows = lake(cdc, table, "userid,member_level,email")
        assert rows["e1"] == (1, "e1@x") and rows["513248"] == (7, None) and rows["10952"] == (8, None)
        history = iceberg.properties[HISTORY_PROPERTY]
        assert "email" in history and "ADD COLUMN email" in history
        added = [s for s in iceberg.snapshots() if "lakehouse.schema-change" in (s.summary.additional_properties
                                                                               if s.summary else {})]
        assert len(added) == 1
        assert spark.sql(f"SELECT email FROM {cdc.catalog.name}.{table} WHERE userid = 'e1'").first()[0] == "e1@x"
        assert not capture.errors
    finally:
        capture.close()
        job.close()


def test_a_wider_integer_widens_the_column_and_keeps_every_value(spark, cdc):
    capture = Running(cdc)
    job = DimensionApplyJob(spark, cdc)
    try:
        execute(cdc, "ALTER TABLE user_member MODIFY memberLevel BIGINT NOT NULL",
                "UPDATE user_member SET memberLevel = 5000000000 WHERE userid = '513248'")
        table = cdc.catalog.members_table
        drain_until(job, lambda: lake(cdc, table, "userid,member_level").get("513248") == (5000000000,))
        assert str(pyiceberg_catalog(cdc).load_table(table).schema().find_field("member_level").field_type) == "long"
        assert lake(cdc, table, "userid,member_level")["10952"] == (3,)
    finally:
        capture.close()
        job.close()


def test_a_dropped_column_stops_the_capture_until_accepted_then_nothing_is_lost_or_doubled(spark, cdc):
    capture = Running(cdc)
    job = DimensionApplyJob(spark, cdc)
    try:
        execute(cdc, "UPDATE user_member SET memberLevel = 2 WHERE userid = '513248'",
                "ALTER TABLE user_member DROP COLUMN show_params",
                "UPDATE user_member SET memberLevel = 9 WHERE userid = '10952'")
        deadline = time.monotonic() + 30
        while not capture.errors:
            assert time.monotonic() < deadline
            time.sleep(0.2)
        stopped = capture.errors[0]
        assert isinstance(stopped, SchemaChangeError) and "show_params: dropped" in str(stopped)
        at = str(stopped).split("--accept-ddl ")[1].split("`")[0]
        table = cdc.catalog.members_table
        drain_until(job, lambda: lake(cdc, table, "userid,member_level").get("513248") == (2,))
        assert lake(cdc, table, "userid,member_level")["10952"] == (3,)  # after the DDL: not published
        capture.close()
        capture = Running(cdc, accept_ddl=at)
        drain_until(job, lambda: lake(cdc, table, "userid,member_level").get("10952") == (9,))
        levels = dict(source(cdc, "SELECT userid, memberLevel FROM user_member"))
        assert {k: v[0] for k, v in lake(cdc, table, "userid,member_level").items()} == levels
        assert "show_params" in pyiceberg_catalog(cdc).load_table(table).schema().column_names  # kept
    finally:
        capture.close()
        job.close()


def test_a_table_added_in_the_settings_is_captured_applied_maintained_and_listed(spark, settings, monkeypatch):
    """Named only in the settings (the table registry): its topic is created by the capture
    (``kafka.create_topics``), its Iceberg schema derived from the source's columns and key at the first
    snapshot; maintenance removes its orphan files and leaves its data files to the writer's folds; the query library
    names it ``{orders}`` and `lakehouse query --list` shows it."""
    cdc = isolated_cdc_settings(settings)
    cdc.kafka.create_topics = True
    suffix = cdc.mariadb.database.removeprefix("shop_")
    cdc.cdc.extra_tables = [CapturedTable(source="orders", table=f"dim_test.orders_{suffix}")]
    execute(cdc, "CREATE TABLE orders (order_id BIGINT PRIMARY KEY, amount DECIMAL(12,2) NOT NULL, "
                 "placed_at DATETIME(3), note TEXT)",
            "INSERT INTO orders VALUES (1, 10.50, '2026-11-26 08:00:00.000', 'first'), (2, 3.25, NULL, NULL)")
    capture = Running(cdc)
    job = DimensionApplyJob(spark, cdc)
    try:
        execute(cdc, "UPDATE orders SET amount = 11.00 WHERE order_id = 1", "INSERT INTO orders VALUES (3, 1, NULL, 'x')",
                "DELETE FROM orders WHERE order_id = 2")
        table = cdc.cdc.extra_tables[0].table
        drain_until(job, lambda: sorted(lake(cdc, table, "order_id,amount")) == [1, 3])
        schema = pyiceberg_catalog(cdc).load_table(table).schema()
        assert [(f.name, str(f.field_type)) for f in schema.fields] == [
            ("order_id", "long"), ("amount", "decimal(12, 2)"), ("placed_at", "timestamp"), ("note", "string")]
        assert {k: str(v[0]) for k, v in lake(cdc, table, "order_id,amount").items()} == {1: "11.00", 3: "1.00"}

        # maintained: a file no snapshot references (what a dropped fold leaves) is removed, the rows stay
        iceberg = pyiceberg_catalog(cdc).load_table(table)
        orphan = f"{iceberg.location()}/data/orphan-{uuid.uuid4().hex}.parquet"
        with iceberg.io.new_output(orphan).create() as out:
            out.write(b"left behind by a fold that never committed")
        time.sleep(1.0)  # older than the margin (0 h here), by the object store's clock
        cdc.maintenance.orphan_older_than_hours = 0
        maintenance, spark_name = MaintenanceJob(spark, cdc, first_orphan_scan_after_s=0), f"{cdc.catalog.name}.{table}"
        assert spark_name in maintenance.tables and spark_name in maintenance.writer_folded
        maintenance.tables = [spark_name]  # this test's table alone: the others belong to other tests
        maintenance.run_once()
        assert [(t, r.action) for t, r in maintenance.results] == [(spark_name, "remove_orphans")]
        assert not iceberg.io.new_input(orphan).exists()
        assert {k: str(v[0]) for k, v in lake(cdc, table, "order_id,amount").items()} == {1: "11.00", 3: "1.00"}

        namespace, name = table.split(".")
        assert render("SELECT count(*) FROM {orders}", cdc) == \
            f'SELECT count(*) FROM {cdc.catalog.trino_catalog}.{namespace}."{name}"'
        monkeypatch.setenv("LAKEHOUSE_CDC__EXTRA_TABLES", json.dumps([{"source": "orders", "table": table}]))
        listed = CliRunner().invoke(app, ["query", "--list"], terminal_width=200)
        assert listed.exit_code == 0, listed.output
        assert any("{orders}" in line and table in line and "writer dims" in line for line in listed.output.splitlines())
    finally:
        capture.close()
        job.close()
