"""`make demo`: the lakehouse's story on the local stack, start to finish.

Starts the binlog capture (its first run snapshots MariaDB), the dimension apply and
click ingestion (both in one Spark application, FAIR pools), produces ClickEvents
(with a share of deliberately bad ones) at a steady rate while showing progress,
applies the seed's product update half-way, waits until every event is committed,
then prints what a data engineer wants to see: counts, dead letters by reason, top
products, how clicks on product 1 picked up its new price, freshness, where to look.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from dataclasses import dataclass

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from lakehouse.settings import Settings

TOP_PRODUCTS_SQL = """
SELECT productId, name, product_price, count(*) AS views, count(DISTINCT uid) AS users
FROM {clicks} WHERE name IS NOT NULL
GROUP BY productId, name, product_price ORDER BY views DESC, productId LIMIT 5
"""
PRODUCT_ONE_SQL = """
SELECT name, product_price, count(*) AS views, min(ingest_time) AS first_seen, max(ingest_time) AS last_seen
FROM {clicks} WHERE productId = '1' AND produced_at >= to_timestamp({since}) GROUP BY name, product_price
ORDER BY first_seen
"""
SEED_UPDATE = "UPDATE products SET description = 'test666', product_price = 8.1 WHERE productId = '1'"
DEAD_LETTER_SQL = "SELECT error_kind, count(*) AS events FROM {dead} GROUP BY error_kind ORDER BY events DESC"


@dataclass
class DemoSummary:
    produced: int
    committed: int
    valid_rows: int
    dead_rows: int
    freshness: tuple[float, float, float]


def _table(title: str, columns: list[str], rows: list[tuple]) -> Table:
    table = Table(title=title)
    for col in columns:
        table.add_column(col)
    for row in rows:
        table.add_row(*[str(v) for v in row])
    return table


def run_demo(settings: Settings, rate: float, duration: float, bad_share: float, console: Console) -> DemoSummary:
    from pipeline.benchmark import committed_total, freshness_quantiles, warm_up
    from deploy.local.services.mariadb import connect as mariadb_connect
    from pipeline.cdc.apply import DimensionApplyJob
    from pipeline.cdc.capture import Capture, read_checkpoint
    from pipeline.clicks.job import ClickIngestJob
    from pipeline.metrics import serve
    from pipeline.runner import run_loop
    from pipeline.spark_session import build_session
    from queries.duckdb_engine import connect, scan_sql

    cat, topic = settings.catalog, settings.kafka.clicks_topic
    stop = threading.Event()
    with console.status("starting the binlog capture (first run: consistent snapshot)..."):
        threading.Thread(target=Capture(settings).run, args=(stop,), daemon=True).start()
        while read_checkpoint(settings) is None:
            time.sleep(0.2)
    console.log(f"capture running: {settings.mariadb.database} -> {settings.kafka.cdc_topic_prefix}.*")
    with console.status("starting Spark: dimension apply + click ingestion in one application..."):
        serve(settings.metrics.host, settings.metrics.pipeline_port)
        spark = build_session(settings, "lakehouse-demo")
        dims = DimensionApplyJob(spark, settings)
        while dims.run_once():  # catch up with the snapshot before clicks are enriched
            pass
        job = ClickIngestJob(spark, settings)

    def in_pool(pool: str, target) -> threading.Thread:
        def run():
            spark.sparkContext.setLocalProperty("spark.scheduler.pool", pool)
            run_loop(target, settings.pipeline.trigger_seconds, stop)
        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        return thread

    loops = [in_pool("dims", dims), in_pool("clicks", job)]
    console.log("dimensions applied from the CDC topics; click ingestion running")
    with console.status("warming up (first batch compiles and starts Python workers)..."):
        warm_up(job, settings, events=200)
    start_offsets = committed_total(job, topic)
    since_ms = int(time.time() * 1000)
    producer = subprocess.Popen(
        [sys.executable, "-m", "loadgen.rate_producer", "--rate", str(rate), "--duration", str(duration),
         "--bad-share", str(bad_share)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    expected = int(rate * duration)
    columns = [TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed:,.0f}/{task.total:,.0f}"),
               TimeElapsedColumn()]
    updated, output, produced = False, None, expected
    with Progress(*columns, console=console) as progress:
        produced_task = progress.add_task("produced ", total=expected)
        committed_task = progress.add_task("committed", total=expected)
        began = time.monotonic()
        while True:
            elapsed = time.monotonic() - began
            if not updated and elapsed >= duration / 2:
                with mariadb_connect(settings, user=settings.mariadb.app_user,
                                     database=settings.mariadb.database) as conn, conn.cursor() as cur:
                    cur.execute(SEED_UPDATE)
                progress.console.log(f"MariaDB: {SEED_UPDATE}")
                updated = True
            committed = committed_total(job, topic) - start_offsets
            progress.update(produced_task, completed=min(produced, rate * elapsed))
            progress.update(committed_task, completed=committed)
            if producer.poll() is not None:
                if output is None:
                    output = producer.stdout.read().strip()
                    produced = int(output.split()[1]) if output.startswith("produced") else expected
                    progress.update(produced_task, total=produced, completed=produced)
                    progress.update(committed_task, total=produced)
                if committed >= produced or elapsed > duration + 120:
                    break
            time.sleep(0.5)
    console.log(output)
    deadline = time.monotonic() + 60
    while committed_total(job, topic) - start_offsets < produced and time.monotonic() < deadline:
        time.sleep(0.5)
    stop.set()
    for loop in loops:
        loop.join(60)
    job.close()
    dims.close()
    committed = committed_total(job, topic) - start_offsets

    con = connect(settings)
    clicks, dead = scan_sql(settings, cat.clicks_table), scan_sql(settings, cat.dead_letter_table)
    console.print(_table("top products (DuckDB over the Iceberg table)", ["productId", "name", "price", "views", "users"],
                         con.execute(TOP_PRODUCTS_SQL.format(clicks=clicks)).fetchall()))
    console.print(_table("clicks on product 1: the price change arrived through CDC mid-run",
                         ["name", "price", "views", "first ingested", "last ingested"],
                         con.execute(PRODUCT_ONE_SQL.format(clicks=clicks, since=since_ms / 1000)).fetchall()))
    console.print(_table("dead letters by reason", ["reason", "events"],
                         con.execute(DEAD_LETTER_SQL.format(dead=dead)).fetchall()))
    valid_rows = con.execute(f"SELECT count(*) FROM {clicks}").fetchone()[0]
    dead_rows = con.execute(f"SELECT count(*) FROM {dead}").fetchone()[0]
    freshness = freshness_quantiles(spark, cat.clicks_table, since_ms)
    spark.stop()
    return DemoSummary(produced, committed, valid_rows, dead_rows, freshness)
