"""CDC benchmark: sustained changes/s and apply freshness (database commit -> visible in Iceberg).

The workload mixes updates of existing rows with inserts of new ones; each insert
carries its database commit time (ms) in ``description``. Freshness is read the way a
reader sees it: the commit time of the Iceberg snapshot that added the row's data
file minus that database commit time.
"""

from __future__ import annotations

import random
import threading
import time
from dataclasses import dataclass

from lakehouse.settings import Settings


@dataclass
class CdcBenchResult:
    target_rate: float
    duration_s: float
    changes: int
    applied_s: float
    sustained_cps: float
    freshness_p50_s: float
    freshness_p95_s: float


def bench_settings(settings: Settings, tag: str) -> Settings:
    s = settings.model_copy(deep=True)
    s.mariadb.database = f"shop_bench_{tag}"
    s.kafka.cdc_topic_prefix = f"cdc_bench_{tag}"
    s.catalog.products_table = f"bench.products_{tag}"
    s.catalog.members_table = f"bench.members_{tag}"
    return s


def write_changes(s: Settings, rate: float, duration: float, tick: float = 0.02) -> int:
    """Paced changes: half inserts (timestamped), half updates; commits every tick."""
    from deploy.local.services.mariadb import connect

    rng, sent, began = random.Random(1), 0, time.monotonic()
    with connect(s, user=s.mariadb.app_user, database=s.mariadb.database) as conn, conn.cursor() as cur:
        conn.autocommit(False)
        while (elapsed := time.monotonic() - began) < duration:
            due = int(rate * elapsed) - sent
            now_ms = int(time.time() * 1000)
            for _ in range(max(0, due)):
                if sent % 2 == 0:
                    cur.execute("INSERT INTO products (productId, name, description, product_price) VALUES "
                                "(%s, 'bench', %s, 1)", (f"b{sent}", str(now_ms)))
                else:
                    cur.execute("UPDATE products SET product_price = %s WHERE productId = %s",
                                (rng.randrange(100, 99_999) / 100, str(rng.randint(1, 9))))
                sent += 1
            conn.commit()
            time.sleep(tick)
    return sent


def freshness(spark, table: str) -> tuple[float, float]:
    row = spark.sql(f"""
        WITH rows AS (SELECT input_file_name() AS file, CAST(description AS BIGINT) AS db_ms FROM {table}
                      WHERE name = 'bench'),
             added AS (SELECT data_file.file_path AS file, snapshot_id FROM {table}.entries WHERE status = 1),
             snaps AS (SELECT snapshot_id, committed_at FROM {table}.snapshots)
        SELECT percentile_approx((unix_millis(s.committed_at) - r.db_ms) / 1000.0, array(0.5, 0.95), 10000) AS q
        FROM rows r JOIN added a ON r.file = a.file JOIN snaps s ON a.snapshot_id = s.snapshot_id
    """).collect()[0]
    return tuple(float(q) for q in row.q) if row.q else (float("nan"), float("nan"))


def run(settings: Settings, rate: float, duration: float, progress=print) -> CdcBenchResult:
    from deploy.local.services.broker import Broker
    from deploy.local.services.mariadb import create_source_database
    from pipeline.cdc.apply import DimensionApplyJob
    from pipeline.cdc.capture import Capture, read_checkpoint
    from pipeline.runner import run_loop
    from pipeline.spark_session import build_session

    s = bench_settings(settings, time.strftime("%Y%m%d%H%M%S"))
    create_source_database(s, s.mariadb.database)
    Broker(s).bootstrap()
    stop = threading.Event()
    capture = threading.Thread(target=Capture(s).run, args=(stop,), daemon=True)
    capture.start()
    while read_checkpoint(s) is None:
        time.sleep(0.2)
    spark = build_session(s, "lakehouse-bench-cdc")
    job = DimensionApplyJob(spark, s)
    loop = threading.Thread(target=run_loop, args=(job, s.pipeline.trigger_seconds, stop), daemon=True)
    loop.start()
    progress(f"writing {rate:,.0f} changes/s for {duration:.0f}s to {s.mariadb.database}")
    began = time.monotonic()
    changes = write_changes(s, rate, duration)
    inserted = (changes + 1) // 2
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        if spark.sql(f"SELECT count(*) FROM {s.catalog.products_table} WHERE name = 'bench'").first()[0] >= inserted:
            break
        time.sleep(0.5)
    applied = time.monotonic() - began
    stop.set()
    loop.join(60)
    job.close()
    p50, p95 = freshness(spark, s.catalog.products_table)
    spark.stop()
    return CdcBenchResult(rate, duration, changes, applied, changes / applied, p50, p95)
