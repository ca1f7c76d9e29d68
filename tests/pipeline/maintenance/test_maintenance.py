"""Table maintenance on real tables, next to real streaming writers.

- compaction, manifest rewrites and expiry running while the click pipeline commits:
  every event exactly once at the end, and a restarted writer still finds its offsets;
- expiry while the live aggregates stream: the results still equal the click table; while they are
  stopped, the click snapshots they have yet to read are kept (up to the reader retention);
- orphan removal deletes a stray file and never a file a retained snapshot references.
"""

from __future__ import annotations

import random
import threading
import time

import pytest

from deploy.local.services.object_store import s3_client
from pipeline.aggregates.rollups import PROGRESS_PROPERTY
from pipeline.clicks.job import ClickIngestJob
from pipeline.kafka_source.offsets import OFFSETS_PROPERTY
from pipeline.maintenance.job import MaintenanceJob
from pipeline.runner import run_loop
from pipeline.snapshot_properties import latest_property
from tests.support.aggregates import Running, append_clicks, click_rows, matches, wait_until
from tests.support.clicks import event_ids


def eager(settings, **overrides):
    """Settings whose maintenance acts at once (tiny thresholds), as a soak would after hours."""
    s = settings.model_copy(deep=True)
    for key, value in {"compact_small_files": 2, "manifests_threshold": 2, "delete_files_threshold": 1,
                       "snapshot_retention_minutes": 0.02, "retain_last_snapshots": 2,
                       "orphan_older_than_hours": 1.0, "clock_skew_seconds": 0.0, **overrides}.items():
        setattr(s.maintenance, key, value)
    return s


def with_aggregates(settings) -> None:
    """Result tables of the test's own beside its click table, and a short aggregate trigger."""
    suffix = settings.catalog.clicks_table.rsplit("_", 1)[1]
    settings.catalog.product_views_table = f"ads_test.product_views_{suffix}"
    settings.catalog.member_activity_table = f"ads_test.member_activity_{suffix}"
    settings.pipeline.aggregate_trigger_seconds = 0.5


def qualified(settings, table: str) -> str:
    return f"{settings.catalog.name}.{table}"


def test_maintenance_next_to_the_click_pipeline_keeps_every_event_exactly_once(spark, click_settings, producer):
    s = eager(click_settings, retain_last_snapshots=1)  # nothing but the progress rule keeps a writer's snapshot
    s.pipeline.trigger_seconds = 0.5
    s.pipeline.merge_seconds = 0  # maintenance alone merges (the job's own merges: test_file_merges.py)
    table = s.catalog.clicks_table
    stop = threading.Event()
    writer = ClickIngestJob(spark, s)
    thread = threading.Thread(target=run_loop, args=(writer, 0.5, stop), daemon=True)
    thread.start()
    maintenance = MaintenanceJob(spark, s)
    actions: dict[str, int] = {}
    try:
        for _ in range(6):
            producer.send(300, bad_share=0.02)
            wait_until(lambda: len(event_ids(spark, table)) >= len(producer.sent.valid), 120, "commits")
            producer.send(300)
            maintenance.run_once()  # races the writer's next commits
            for _, result in maintenance.results:
                actions[result.action] = actions.get(result.action, 0) + 1
        wait_until(lambda: len(event_ids(spark, table)) >= len(producer.sent.valid), 120, "the last commits")
    finally:
        stop.set()
        thread.join(60)
        writer.close()
    assert {"compact", "expire", "rewrite_manifests"} <= set(actions), actions
    ids = event_ids(spark, table)
    assert len(ids) == len(set(ids)) == len(producer.sent.valid)  # nothing duplicated
    assert set(ids) == set(producer.sent.valid)  # nothing lost

    # Now maintenance alone: its own commits become the newest snapshots and expiry runs
    # past the writers' last commits. Their progress snapshots must survive it.
    for _ in range(2):
        time.sleep(1.5)  # older than the retention
        maintenance.run_once()
    newest = spark.sql(f"SELECT operation FROM {qualified(s, table)}.snapshots ORDER BY committed_at DESC LIMIT 1")
    assert newest.first().operation == "replace"  # a maintenance snapshot, no offsets in it
    assert latest_property(spark, table, OFFSETS_PROPERTY) is not None

    # A restarted writer neither re-reads nor skips.
    producer.send(200)
    again = ClickIngestJob(spark, s)
    try:
        while again.run_once():
            pass
    finally:
        again.close()
    ids = event_ids(spark, table)
    assert len(ids) == len(set(ids)) == len(producer.sent.valid)
    # And the table stays small: one more pass leaves few files per day.
    maintenance.run_once()
    files = spark.sql(f"SELECT count(*) AS n FROM {qualified(s, table)}.data_files GROUP BY partition").collect()
    assert max(r.n for r in files) <= s.maintenance.compact_small_files


def test_expiry_never_breaks_the_live_aggregates(spark, click_settings):
    s = eager(click_settings)
    with_aggregates(s)
    rng = random.Random(8)
    append_clicks(spark, s, click_rows(200, rng))
    maintenance = MaintenanceJob(spark, s)
    maintenance.tables = [qualified(s, s.catalog.clicks_table)]
    expired = 0
    with Running(spark, s):
        wait_until(lambda: matches(spark, s), 120, "first aggregates")
        for _ in range(4):
            append_clicks(spark, s, click_rows(50, rng))
            time.sleep(1.5)
            maintenance.run_once()  # compacts and expires under the running stream
            expired += sum(r.snapshots_expired for _, r in maintenance.results)
        wait_until(lambda: matches(spark, s), 180, "aggregates equal to the click table after maintenance")
    assert expired > 0
    assert spark.sql(f"SELECT sum(views) AS v FROM {s.catalog.product_views_table}").first().v == 400


def test_expiry_keeps_the_click_snapshots_the_stopped_aggregates_have_not_read(spark, click_settings):
    s = eager(click_settings, retain_last_snapshots=1)
    with_aggregates(s)
    rng = random.Random(9)
    append_clicks(spark, s, click_rows(100, rng))
    with Running(spark, s):
        wait_until(lambda: matches(spark, s), 120, "first aggregates")
    position = int(latest_property(spark, s.catalog.product_views_table, PROGRESS_PROPERTY) or 0)
    for _ in range(3):  # snapshots the stopped aggregates have not read
        append_clicks(spark, s, click_rows(30, rng))
    time.sleep(2)  # every click snapshot is now older than the retention (0.02 min)
    maintenance = MaintenanceJob(spark, s)
    maintenance.tables = [qualified(s, s.catalog.clicks_table)]
    maintenance.run_once()
    kept = {r.snapshot_id for r in spark.sql(f"SELECT snapshot_id FROM {s.catalog.clicks_table}.snapshots").collect()}
    assert position in kept, "the snapshot the aggregates stand on is kept while they are stopped"

    with Running(spark, s) as aggregates:
        wait_until(lambda: matches(spark, s), 120, "aggregates caught up from their position")
    assert aggregates.rebuilds == 0, "read on from their position, not rebuilt from the whole table"

    s.maintenance.reader_retention_minutes = 0.0001  # a reader stopped for longer than this is not waited for
    append_clicks(spark, s, click_rows(10, rng))
    time.sleep(2)
    position = int(latest_property(spark, s.catalog.product_views_table, PROGRESS_PROPERTY) or 0)
    maintenance = MaintenanceJob(spark, s)
    maintenance.tables = [qualified(s, s.catalog.clicks_table)]
    maintenance.run_once()
    kept = {r.snapshot_id for r in spark.sql(f"SELECT snapshot_id FROM {s.catalog.clicks_table}.snapshots").collect()}
    assert position not in kept


@pytest.fixture
def small_table(spark, settings):
    name = f"ods_test.orphans_{int(time.time() * 1000)}"
    spark.sql("CREATE NAMESPACE IF NOT EXISTS ods_test")  # when this test runs on its own
    spark.sql(f"CREATE TABLE {name} (id BIGINT, v STRING) USING iceberg TBLPROPERTIES ('format-version'='2')")
    for i in range(3):
        spark.sql(f"INSERT INTO {name} VALUES ({i}, 'row {i}')")
    return name


def test_orphan_removal_keeps_every_file_a_retained_snapshot_needs(spark, settings, small_table):
    s = eager(settings, orphan_older_than_hours=0.0)  # no writer here, so no in-flight files to protect
    full = qualified(s, small_table)
    first = spark.sql(f"SELECT snapshot_id FROM {full}.snapshots ORDER BY committed_at LIMIT 1").first().snapshot_id
    spark.sql(f"CALL {s.catalog.name}.system.rewrite_data_files(table => '{small_table}', "
              f"options => map('min-input-files', '1'))")  # old files now only in older snapshots
    location = spark.sql(f"DESCRIBE TABLE EXTENDED {full}").where("col_name = 'Location'").first().data_type
    bucket, _, prefix = location.removeprefix("s3://").partition("/")
    client = s3_client(s)
    stray = f"{prefix}/data/stray-{int(time.time())}.parquet"
    client.put_object(Bucket=bucket, Key=stray, Body=b"not referenced by any snapshot")
    time.sleep(1.5)  # older than the (zero) margin by the time the procedure lists

    job = MaintenanceJob(spark, s, first_orphan_scan_after_s=0)
    job.tables = [full]
    job.run_once()
    removed = sum(r.orphans_removed for _, r in job.results if r.action == "remove_orphans")
    assert removed >= 1
    assert "Contents" not in client.list_objects_v2(Bucket=bucket, Prefix=stray)
    referenced = [r.file_path for r in spark.sql(f"SELECT file_path FROM {full}.all_files").collect()]
    assert referenced
    for path in referenced:
        key = path.removeprefix(f"s3://{bucket}/")
        client.head_object(Bucket=bucket, Key=key)  # raises if maintenance deleted it
    retained = [r.snapshot_id for r in spark.sql(f"SELECT snapshot_id FROM {full}.snapshots").collect()]
    if first in retained:  # time travel to the oldest retained snapshot still reads
        assert spark.sql(f"SELECT count(*) AS n FROM {full} VERSION AS OF {first}").first().n == 1
    assert spark.table(full).count() == 3


def test_expiry_deletes_what_only_expired_snapshots_referenced(spark, settings, small_table):
    """Compaction leaves the three insert files to older snapshots; expiring those snapshots deletes them.

    Expiry runs through Iceberg's table API with incremental clean-up (not the procedure),
    which deletes a replaced file once the snapshot that replaced it is expired too; hence
    the insert after the compaction. This fails if expiry stops deleting the files it frees
    or deletes a file still in use.
    """
    s = eager(settings, snapshot_retention_minutes=0.0001, retain_last_snapshots=1, compact_small_files=100,
              manifests_threshold=1000)  # expiry alone
    full = qualified(s, small_table)
    old = {r.file_path for r in spark.sql(f"SELECT file_path FROM {full}.data_files").collect()}
    spark.sql(f"CALL {s.catalog.name}.system.rewrite_data_files(table => '{small_table}', "
              f"options => map('min-input-files', '1'))")
    spark.sql(f"INSERT INTO {full} VALUES (3, 'row 3')")
    current = {r.file_path for r in spark.sql(f"SELECT file_path FROM {full}.data_files").collect()}
    assert len(old) == 3 and len(current) == 2 and not old & current
    time.sleep(0.5)  # every snapshot older than the retention

    job = MaintenanceJob(spark, s)
    job.tables = [full]
    job.run_once()
    expired = sum(r.snapshots_expired for _, r in job.results if r.action == "expire")
    assert expired == 4  # three inserts and the compaction; the last insert is the one retained
    assert spark.sql(f"SELECT count(*) AS n FROM {full}.snapshots").first().n == 1
    client = s3_client(s)
    for path in old | current:
        bucket, _, key = path.removeprefix("s3://").partition("/")
        exists = "Contents" in client.list_objects_v2(Bucket=bucket, Prefix=key)
        assert exists == (path in current), f"{path}: {'kept' if exists else 'deleted'}"
    assert spark.table(full).count() == 4


def test_compaction_and_merges_rewrite_each_file_once_per_tier(spark, settings):
    """Size-tiered maintenance: every pass rewrites only what arrived since the last one at its tier.

    Three rounds of three compactions and one merge, then a merge of the three merges' outputs.
    Fails if a pass rewrites the previous compaction's output (the old rule: everything under
    3/4 of the target, every pass), if a merge rewrites an earlier merge's output before
    enough of them pile up, or if merge outputs are never merged (the old two tiers: they
    stayed put, ~160 files in a day-partition at 2,000 events/s).
    """
    full = qualified(settings, f"ods_test.tiers_{int(time.time() * 1000)}")
    spark.sql("CREATE NAMESPACE IF NOT EXISTS ods_test")
    spark.sql(f"CREATE TABLE {full} (id BIGINT, v STRING) USING iceberg TBLPROPERTIES ('format-version'='2')")

    def insert(times: int) -> None:  # one small data file each, of uuids (sizes vary by some bytes)
        for _ in range(times):
            spark.sql(f"INSERT INTO {full} SELECT /*+ COALESCE(1) */ id, uuid() FROM range(400)")

    def files() -> dict[str, int]:
        return {r.file_path: r.file_size_in_bytes
                for r in spark.sql(f"SELECT file_path, file_size_in_bytes FROM {full}.data_files").collect()}

    insert(2)
    one_insert = max(files().values())
    # Small: up to 1.5 inserts, so two compacted are not small; fan-in 3, so tiers grow by 1.5
    # and a merge of three two-insert files skips tiers; the target (1 MB, final from 768 KB)
    # leaves room for all 18 inserts in one merged file.
    s = eager(settings, small_file_mb=1.5 * one_insert / 2**20, target_file_mb=1, compact_small_files=2,
              compact_medium_files=3, manifests_threshold=1000, snapshot_retention_minutes=1000)
    bounds = s.maintenance.tier_bounds
    assert 18 * one_insert < s.maintenance.final_file_bytes, "inserts too large for the test's target size"
    job = MaintenanceJob(spark, s)
    job.tables = [full]

    def run_pass() -> list[tuple[str, int | None]]:
        job.run_once()
        return [(r.action, r.tier) for _, r in job.results if r.action in ("compact", "merge")]

    def tier(size: int) -> int:
        return sum(size >= bound for bound in bounds)

    merged: dict[str, int] = {}
    for round_ in range(3):
        for compaction in range(3):
            if (round_, compaction) != (0, 0):  # the first two inserts are in already
                insert(2)
            before = files()
            assert run_pass() == [("compact", None)]
            now = files()
            small = {path for path, size in before.items() if size < bounds[0]}
            assert set(before) - small <= set(now), "a compaction rewrote an earlier output"
        assert run_pass() == [("merge", 1)]  # three compaction outputs, tier 1
        now = files()
        assert set(merged) <= set(now), "a tier-1 merge rewrote an earlier merge's output"
        (output,) = set(now) - set(merged)
        assert tier(now[output]) > 1
        merged[output] = now[output]
    merged_tier = {tier(size) for size in merged.values()}
    assert len(merged_tier) == 1
    assert run_pass() == [("merge", *merged_tier)]  # the three merge outputs, merged once more
    (final,) = files().items()
    assert final[0] not in merged and tier(final[1]) > max(merged_tier)
    assert spark.table(full).count() == 18 * 400


@pytest.mark.parametrize("interval, hot_compactions", [(0.001, 2), (600.0, 1)])
def test_a_long_pass_looks_at_the_click_table_again(spark, settings, interval, hot_compactions):
    """Small files the writer adds while another table is maintained are compacted in the same pass
    once an interval has gone by since the click table's last look, and only then."""
    s = eager(settings, interval_seconds=interval)
    s.pipeline.merge_seconds = 0  # no click job merges the stand-in click table's files: they are all maintenance's
    stamp = int(time.time() * 1000)
    hot, other, last = (f"ods_test.revisit_{name}_{stamp}" for name in ("hot", "other", "last"))
    spark.sql("CREATE NAMESPACE IF NOT EXISTS ods_test")
    for name in (hot, other, last):
        spark.sql(f"CREATE TABLE {name} (id BIGINT) USING iceberg TBLPROPERTIES ('format-version'='2')")
        for i in range(3):
            spark.sql(f"INSERT INTO {name} VALUES ({i})")
    spark.sql(f"ALTER TABLE {hot} WRITE ORDERED BY id")  # the click table's compaction sorts
    job = MaintenanceJob(spark, s)
    job.tables = [qualified(s, t) for t in (other, hot, last)]
    job.clicks = qualified(s, hot)
    visit = job._maintain
    visited = []

    def visit_then_write(table):
        visit(table)
        visited.append(table)
        if table == job.clicks and len(visited) == 1:  # the writer commits while the next table is maintained
            for i in range(3, 5):
                spark.sql(f"INSERT INTO {job.clicks} VALUES ({i})")

    job._maintain = visit_then_write
    job.run_once()
    compactions = [t for t, r in job.results if r.action == "compact" and t == job.clicks]
    assert len(compactions) == hot_compactions
    assert visited[0] == job.clicks
    files = spark.sql(f"SELECT count(*) AS n FROM {job.clicks}.files").first().n
    assert files == (1 if hot_compactions == 2 else 3)  # one compacted file, or it plus the two new ones
    assert spark.table(job.clicks).count() == 5
