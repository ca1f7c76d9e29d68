"""Exactly-once under crashes: kill -9 of the job, and a broker restart mid-run."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time

from lakehouse.settings_env import settings_env
from pipeline.clicks.job import ClickIngestJob
from pipeline.runner import run_loop
from tests.support.clicks import event_ids, wait_for


def test_kill_minus_nine_at_random_moments_loses_and_duplicates_nothing(spark, click_settings, producer, tmp_path):
    env = {**os.environ, **settings_env(click_settings, with_secrets=True), "LAKEHOUSE_PIPELINE__TRIGGER_SECONDS": "0.5"}
    table = click_settings.catalog.clicks_table
    stop_producing = threading.Event()

    def produce():
        while not stop_producing.is_set():
            producer.send(200, bad_share=0.01)
            time.sleep(0.2)

    feeder = threading.Thread(target=produce)
    feeder.start()
    rng = random.Random(11)
    log_path = tmp_path / "job.log"
    log = log_path.open("ab")
    try:
        for cycle in range(2):  # two kills at random moments (three cost CI another minute)
            job = subprocess.Popen([sys.executable, "-m", "cli.main", "run", "clicks", "--log-level", "warning"],
                                   env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
            seen, started = len(event_ids(spark, table)), time.monotonic()
            wait_for(lambda seen=seen: len(event_ids(spark, table)) > seen, 180, "the job to commit", log_path)
            print(f"restart {cycle}: first commit after {time.monotonic() - started:.1f}s")
            time.sleep(rng.uniform(0.0, 3.0))
            os.killpg(job.pid, signal.SIGKILL)
            job.wait()
    finally:
        stop_producing.set()
        feeder.join()
    final = subprocess.Popen([sys.executable, "-m", "cli.main", "run", "clicks", "--log-level", "warning"],
                             env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_for(lambda: len(event_ids(spark, table)) >= len(producer.sent.valid), 180, "every event to land", log_path)
        time.sleep(3)  # a duplicate would show up in a later batch
    finally:
        os.killpg(final.pid, signal.SIGTERM)
        final.wait(60)
    ids = event_ids(spark, table)
    assert len(ids) == len(set(ids)), f"{len(ids) - len(set(ids))} duplicated events"
    assert set(ids) == set(producer.sent.valid)
    dead = spark.table(click_settings.catalog.dead_letter_table).select("kafka_partition", "kafka_offset").collect()
    assert len(dead) == len(set(dead)) == len(producer.sent.bad)


def _through_a_fault(spark, click_settings, producer, fault, what: str) -> ClickIngestJob:
    """The job in its loop: 1,000 events land, ``fault(job)``, 1,000 more land; every event exactly once."""
    job = ClickIngestJob(spark, click_settings)
    stop = threading.Event()
    runner = threading.Thread(target=run_loop, args=(job, 0.5, stop))
    runner.start()
    table = click_settings.catalog.clicks_table
    try:
        producer.send(1000)
        wait_for(lambda: len(event_ids(spark, table)) >= 1000, 120, "first events")
        fault(job)
        producer.send(1000)
        wait_for(lambda: len(event_ids(spark, table)) >= 2000, 180, f"events after {what}")
    finally:
        stop.set()
        runner.join(120)
        job.close()
    ids = event_ids(spark, table)
    assert len(ids) == len(set(ids)) == 2000
    assert set(ids) == set(producer.sent.valid)
    return job


def test_broker_restart_mid_run_recovers_by_itself(stack, spark, click_settings, producer):
    _through_a_fault(spark, click_settings, producer, lambda job: stack.restart("kafka"), "the broker restart")


def _standing_workers() -> list:
    """The Python workers Spark forked for this process's tasks (children of its Python worker daemon)."""
    import psutil

    found = []
    for process in psutil.Process().children(recursive=True):
        try:
            parent = process.parent()
            if parent is not None and "python_daemon" in " ".join(parent.cmdline()):
                found.append(process)
        except psutil.Error:  # ended meanwhile
            continue
    return found


def test_a_standing_task_killed_mid_run_is_started_again_and_loses_nothing(spark, click_settings, producer):
    """kill -9 of the standing tasks' Python workers: the batch fails, recovery starts new tasks, every event once."""
    killed = []

    def kill(job) -> None:
        killed.append(job.tasks)
        workers = _standing_workers()
        assert len(workers) >= click_settings.pipeline.click_tasks, workers
        for worker in workers:
            worker.kill()

    job = _through_a_fault(spark, click_settings, producer, kill, "the tasks were killed")
    assert job.tasks is not killed[0], "the job started new standing tasks"
