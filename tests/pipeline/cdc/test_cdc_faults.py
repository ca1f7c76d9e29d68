"""A randomized workload with kill -9 of the capture and of the apply job: the lake ends equal to the source."""

from __future__ import annotations

import os
import random
import signal
import threading
import time

from deploy.local.services.mariadb import connect as mariadb_connect
from lakehouse.settings_env import settings_env
from tests.support.cdc import checksum, isolated_cdc_settings, lake_rows, random_workload, source_rows, start_job, wait_equal


def test_random_workload_with_kill_minus_nine(spark, settings, tmp_path):
    s = isolated_cdc_settings(settings)
    env = {**os.environ, **settings_env(s, with_secrets=True), "LAKEHOUSE_PIPELINE__TRIGGER_SECONDS": "0.5"}
    log = (tmp_path / "jobs.log").open("ab")
    stop = threading.Event()
    writer = threading.Thread(target=random_workload, args=(s, stop))
    writer.start()
    rng = random.Random(3)
    procs = {"cdc": start_job("cdc", env, log), "dims": start_job("dims", env, log)}
    try:
        for victim in ["cdc", "dims", "cdc", "dims"]:
            time.sleep(rng.uniform(4, 10))
            os.killpg(procs[victim].pid, signal.SIGKILL)
            procs[victim].wait()
            procs[victim] = start_job(victim, env, log)
        time.sleep(3)
    finally:
        stop.set()
        writer.join()
    try:
        wait_equal(spark, s, 180)
    finally:
        for proc in procs.values():
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(60)
    assert checksum(lake_rows(spark, s)) == checksum(source_rows(s))


def test_kill_minus_nine_between_a_ddl_and_the_first_change_after_it(spark, settings, tmp_path):
    """ADD COLUMN while changes flow; the capture is killed right after the statement, the apply job right after
    the capture restarted (the first change carrying the column is then in flight): the lake ends equal to the
    source, with the column, its values, and one schema change in the table's history."""
    s = isolated_cdc_settings(settings)
    env = {**os.environ, **settings_env(s, with_secrets=True), "LAKEHOUSE_PIPELINE__TRIGGER_SECONDS": "0.5"}
    log = (tmp_path / "jobs.log").open("ab")
    stop = threading.Event()
    writer = threading.Thread(target=random_workload, args=(s, stop, 11))
    procs = {"cdc": start_job("cdc", env, log), "dims": start_job("dims", env, log)}
    try:
        writer.start()
        time.sleep(6)
        with mariadb_connect(s, user="root", database=s.mariadb.database) as conn, conn.cursor() as cur:
            cur.execute("ALTER TABLE user_member ADD COLUMN email VARCHAR(64)")
            for victim in ("cdc", "dims"):
                os.killpg(procs[victim].pid, signal.SIGKILL)
                procs[victim].wait()
                procs[victim] = start_job(victim, env, log)
                if victim == "cdc":
                    cur.execute("UPDATE user_member SET email = 'first@after.ddl' WHERE userid = '513248'")
                    conn.commit()
        time.sleep(4)
        with mariadb_connect(s, user="root", database=s.mariadb.database) as conn, conn.cursor() as cur:
            cur.execute("UPDATE user_member SET email = 'second@after.ddl' WHERE userid = '10952'")
            conn.commit()
    finally:
        stop.set()
        writer.join()
    try:
        wait_equal(spark, s, 180)
        table = f"{s.catalog.name}.{s.catalog.members_table}"
        deadline = time.monotonic() + 60
        while (emails := dict(spark.sql(f"SELECT userid, email FROM {table} WHERE email IS NOT NULL").collect())) \
                != {"513248": "first@after.ddl", "10952": "second@after.ddl"}:
            assert time.monotonic() < deadline, emails
            time.sleep(1)
    finally:
        for proc in procs.values():
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(60)
    assert checksum(lake_rows(spark, s)) == checksum(source_rows(s))
    history = spark.sql(f"SELECT summary FROM {table}.snapshots").collect()
    assert sum(1 for (summary,) in history if "lakehouse.schema-change" in summary) == 1
