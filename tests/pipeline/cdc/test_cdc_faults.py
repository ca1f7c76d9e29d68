"""A randomized workload with kill -9 of the capture and of the apply job: the lake ends equal to the source."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time

from deploy.local.services.mariadb import connect as mariadb_connect
from lakehouse.settings_env import settings_env
from tests.support.cdc import checksum, isolated_cdc_settings, lake_rows, source_rows, wait_equal


def random_workload(s, stop: threading.Event, seed: int = 5) -> int:
    """Inserts, updates, deletes, delete+reinsert of one key, bursts of updates, multi-row transactions."""
    rng = random.Random(seed)
    done = 0
    with mariadb_connect(s, user=s.mariadb.app_user, database=s.mariadb.database) as conn:
        conn.autocommit(False)
        with conn.cursor() as cur:
            while not stop.is_set():
                kind = rng.choice(["insert", "update", "delete", "reinsert", "burst", "multi"])
                key = f"k{rng.randrange(40)}"
                if kind == "insert":
                    cur.execute("INSERT IGNORE INTO products (productId, name, product_price) VALUES (%s, 'n', 1)", (key,))
                elif kind == "update":
                    cur.execute("UPDATE products SET product_price = %s, name = %s WHERE productId = %s",
                                (rng.randrange(1, 10**6) / 100, f"n{done}", rng.choice([key, str(rng.randint(1, 9))])))
                elif kind == "delete":
                    cur.execute("DELETE FROM products WHERE productId = %s", (key,))
                elif kind == "reinsert":
                    cur.execute("DELETE FROM user_member WHERE userid = %s", (key,))
                    cur.execute("INSERT INTO user_member (userid, name, memberLevel) VALUES (%s, 'again', %s)",
                                (key, rng.randint(1, 5)))
                elif kind == "burst":
                    for level in range(1, 6):
                        cur.execute("UPDATE user_member SET memberLevel = %s WHERE userid = '555655'", (level,))
                        conn.commit()
                else:
                    cur.executemany("INSERT INTO products (productId, name, product_price) VALUES (%s, 'multi', 2) "
                                    "ON DUPLICATE KEY UPDATE name = 'multi2'", [(f"m{rng.randrange(20)}",) for _ in range(3)])
                conn.commit()
                done += 1
                time.sleep(rng.uniform(0, 0.01))
    return done


def start(command: str, env: dict, log) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "cli.main", "run", command, "--log-level", "warning"],
                            env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)


def test_random_workload_with_kill_minus_nine(spark, settings, tmp_path):
    s = isolated_cdc_settings(settings)
    env = {**os.environ, **settings_env(s, with_secrets=True), "LAKEHOUSE_PIPELINE__TRIGGER_SECONDS": "0.5"}
    log = (tmp_path / "jobs.log").open("ab")
    stop = threading.Event()
    writer = threading.Thread(target=random_workload, args=(s, stop))
    writer.start()
    rng = random.Random(3)
    procs = {"cdc": start("cdc", env, log), "dims": start("dims", env, log)}
    try:
        for victim in ["cdc", "dims", "cdc", "dims"]:
            time.sleep(rng.uniform(4, 10))
            os.killpg(procs[victim].pid, signal.SIGKILL)
            procs[victim].wait()
            procs[victim] = start(victim, env, log)
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
