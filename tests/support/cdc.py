"""Helpers for CDC tests: an isolated source database, topics and dimension tables."""

from __future__ import annotations

import random
import subprocess
import sys
import threading
import time
import uuid

from confluent_kafka.admin import NewTopic

from deploy.local.services.broker import admin_client
from deploy.local.services.mariadb import connect as mariadb_connect
from deploy.local.services.mariadb import create_source_database
from lab.reconcile import checksum, lake_rows, source_rows  # noqa: F401 - the CDC tests' helpers
from lab.reconcile import wait_until_equal as wait_equal  # noqa: F401


def isolated_cdc_settings(settings):
    """Settings with this test's own database, CDC topics and dimension tables (seeded like `shop`)."""
    s = settings.model_copy(deep=True)
    suffix = uuid.uuid4().hex[:8]
    s.mariadb.database = f"shop_{suffix}"
    s.kafka.cdc_topic_prefix = f"cdc_{suffix}"
    s.catalog.products_table = f"dim_test.products_{suffix}"
    s.catalog.members_table = f"dim_test.members_{suffix}"
    create_source_database(s, s.mariadb.database)
    admin = admin_client(s)
    topics = [NewTopic(s.cdc_topic(t), 1, 1) for t in s.cdc_tables] + [NewTopic(s.cdc_position_topic, 1, 1),
                                                                        NewTopic(s.cdc_schema_topic, 1, 1)]
    for future in admin.create_topics(topics).values():
        future.result()
    return s


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


def start_job(command: str, env: dict, log) -> subprocess.Popen:
    """`lakehouse run <command>` in its own process group (so a kill -9 takes its JVM along)."""
    return subprocess.Popen([sys.executable, "-m", "cli.main", "run", command, "--log-level", "warning"],
                            env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)


def execute(s, *statements, user=None):
    with mariadb_connect(s, user=user or s.mariadb.app_user, database=s.mariadb.database) as conn, \
            conn.cursor() as cur:
        for sql in statements:
            cur.execute(sql)
