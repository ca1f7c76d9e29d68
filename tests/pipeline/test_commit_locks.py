"""A writer that dies holding the metastore's table lock must not stall later commits."""

from __future__ import annotations

import time

from hive_metastore.ttypes import HeartbeatRequest, LockComponent, LockLevel, LockRequest, LockType

from pipeline.commit_locks import StaleLockReaper, _Metastore, release_stale_locks


def take_lock(settings, table: str) -> int:
    """A table lock taken the way Iceberg takes it, then abandoned (as by a writer killed mid-commit)."""
    database, name = table.split(".")
    component = LockComponent(type=LockType.EXCLUSIVE, level=LockLevel.TABLE, dbname=database, tablename=name)
    with _Metastore(settings) as client:
        return client.lock(LockRequest(component=[component], user="dead-writer", hostname="localhost")).lockid


def test_a_dead_writers_lock_is_freed_and_the_next_commit_goes_through(spark, click_settings):
    s = click_settings.model_copy(deep=True)
    s.metastore.stale_lock_seconds = 6
    table = s.catalog.clicks_table
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {table.split('.')[0]}")
    spark.sql(f"CREATE TABLE {table} (id BIGINT) USING iceberg")
    take_lock(s, table)

    started = time.monotonic()
    with StaleLockReaper(s, [table]):
        spark.sql(f"INSERT INTO {table} VALUES (1)")
    waited = time.monotonic() - started

    assert spark.table(table).count() == 1
    assert waited < 60, f"the commit waited {waited:.0f}s; Iceberg alone would time out after 180 s"


def test_a_live_lock_is_left_alone(click_settings):
    s = click_settings.model_copy(deep=True)
    s.metastore.stale_lock_seconds = 3
    table = s.catalog.dead_letter_table
    lock_id = take_lock(s, table)
    for _ in range(3):
        time.sleep(1.5)
        with _Metastore(s) as client:
            client.heartbeat(HeartbeatRequest(lockid=lock_id))
        assert release_stale_locks(s, [table]) == []
    time.sleep(3.5)
    assert release_stale_locks(s, [table]) == [lock_id]
