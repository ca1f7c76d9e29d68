"""The live aggregates as `lakehouse run aggregate`, a Spark application with two executor processes (Spark's
local-cluster mode), killed with SIGKILL mid-batch (its driver, one of its executors) while the clicks keep coming
and their writer restarts: the result tables end equal to a batch recomputation from the click table."""

from __future__ import annotations

import os
import random
import signal
import threading
import time

import psutil

from lab.bench.cdc import free_port
from lakehouse.settings_env import settings_env
from tests.support.aggregates import append_clicks, click_rows, matches, wait_until
from tests.support.cdc import start_job
from tests.support.spark_cluster import TWO_EXECUTORS, executors


def _committed_position(spark, settings) -> bool:
    table = settings.catalog.product_views_table
    return bool(spark.catalog.tableExists(table) and
                spark.sql(f"SELECT count(*) FROM {table}.snapshots").first()[0])


def test_kill_minus_nine_of_the_driver_and_an_executor_mid_batch_loses_and_doubles_nothing(spark, agg_settings, tmp_path):
    env = {**os.environ, **settings_env(agg_settings, with_secrets=True),
           "LAKEHOUSE_PIPELINE__AGGREGATE_TRIGGER_SECONDS": "0.5",
           "LAKEHOUSE_METRICS__AGGREGATE_PORT": str(free_port(agg_settings.metrics.host)),
           # two executors of one core each, processes of their own, launched by an in-driver standalone worker
           "SPARK_MASTER": TWO_EXECUTORS}
    log = (tmp_path / "aggregate.log").open("ab")
    rng = random.Random(7)
    append_clicks(spark, agg_settings, click_rows(100, rng))
    stop_writer = threading.Event()
    appended = [100]

    def click_writer():  # the click job's commits: one append every few hundred milliseconds
        while not stop_writer.is_set():
            append_clicks(spark, agg_settings, click_rows(40, rng))
            appended[0] += 40
            time.sleep(0.3)

    process = start_job("aggregate", env, log)
    writer = threading.Thread(target=click_writer)
    try:
        wait_until(lambda: _committed_position(spark, agg_settings), 180, "the first aggregate commit")
        writer.start()
        kills = 0
        for victim in ("driver", "executor", "driver", "executor"):
            time.sleep(rng.uniform(2, 5))
            if victim == "driver":
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
                process = start_job("aggregate", env, log)
                kills += 1
            else:
                deadline = time.monotonic() + 120
                while not (running := executors(process.pid)):
                    assert time.monotonic() < deadline, "no executor process ever started"
                    time.sleep(0.1)
                victim_pid = rng.choice(running).pid
                psutil.Process(victim_pid).kill()  # its tasks run again elsewhere; the worker launches a new one
                seen = {e.pid for e in running}
                while not ({e.pid for e in executors(process.pid)} - seen):
                    assert time.monotonic() < deadline + 60, "no executor was launched after the kill"
                    time.sleep(0.2)
                kills += 1
            if victim == "driver" and kills == 3:  # the click writer restarts too, under the restarted job
                stop_writer.set()
                writer.join()
                stop_writer.clear()
                writer = threading.Thread(target=click_writer)
                writer.start()
        time.sleep(2)
        stop_writer.set()
        writer.join()
        wait_until(lambda: matches(spark, agg_settings), 240, "the result tables equal to a recomputation")
        assert process.poll() is None, "the aggregate job stopped instead of retrying"
    finally:
        stop_writer.set()
        if writer.is_alive():
            writer.join()
        os.killpg(process.pid, signal.SIGTERM)  # the job and its JVMs, whatever happened above
        process.wait(60)
    views = spark.table(agg_settings.catalog.product_views_table).groupBy().sum("views").first()[0]
    assert views == appended[0] == spark.table(agg_settings.catalog.clicks_table).count()
