"""`make demo`: the click pipeline's story on the local stack, start to finish.

Loads the dimensions from MariaDB, starts click ingestion, produces ClickEvents
(with a share of deliberately bad ones) at a steady rate while showing progress,
waits until every event is committed, then prints what a data engineer wants to see:
counts, dead letters by reason, top products, freshness, and where to look next.
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
    from pipeline.benchmark import freshness_quantiles, warm_up
    from pipeline.clicks.job import ClickIngestJob
    from pipeline.dims_snapshot import load_dimensions
    from pipeline.metrics import serve
    from pipeline.runner import run_loop
    from pipeline.spark_session import build_session
    from queries.duckdb_engine import connect, scan_sql

    cat, topic = settings.catalog, settings.kafka.clicks_topic
    with console.status("starting Spark and the click pipeline..."):
        serve(settings.metrics.host, settings.metrics.pipeline_port)
        spark = build_session(settings, "lakehouse-demo")
        products, members = load_dimensions(spark, settings)
        job = ClickIngestJob(spark, settings)
    console.log(f"dimensions loaded from MariaDB: {products} products, {members} members")
    stop = threading.Event()
    loop = threading.Thread(target=run_loop, args=(job, settings.pipeline.trigger_seconds, stop), daemon=True)
    loop.start()
    with console.status("warming up (first batch compiles and starts Python workers)..."):
        warm_up(job, settings, events=200)
    start_offsets = sum(job.committed.get(topic, {}).values())
    since_ms = int(time.time() * 1000)
    producer = subprocess.Popen(
        [sys.executable, "-m", "loadgen.rate_producer", "--rate", str(rate), "--duration", str(duration),
         "--bad-share", str(bad_share)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    expected = int(rate * duration)
    columns = [TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed:,.0f}/{task.total:,.0f}"),
               TimeElapsedColumn()]
    with Progress(*columns, console=console) as progress:
        produced_task = progress.add_task("produced ", total=expected)
        committed_task = progress.add_task("committed", total=expected)
        began = time.monotonic()
        while True:
            elapsed = time.monotonic() - began
            committed = sum(job.committed.get(topic, {}).values()) - start_offsets
            progress.update(produced_task, completed=min(expected, rate * elapsed))
            progress.update(committed_task, completed=committed)
            if producer.poll() is not None and committed >= expected * 0.999 or elapsed > duration + 120:
                break
            time.sleep(0.5)
    output = producer.stdout.read().strip()
    console.log(output)
    produced = int(output.split()[1]) if output.startswith("produced") else expected
    deadline = time.monotonic() + 60
    while sum(job.committed.get(topic, {}).values()) - start_offsets < produced and time.monotonic() < deadline:
        time.sleep(0.5)
    stop.set()
    loop.join(60)
    job.close()
    committed = sum(job.committed.get(topic, {}).values()) - start_offsets

    con = connect(settings)
    clicks, dead = scan_sql(settings, cat.clicks_table), scan_sql(settings, cat.dead_letter_table)
    console.print(_table("top products (DuckDB over the Iceberg table)", ["productId", "name", "price", "views", "users"],
                         con.execute(TOP_PRODUCTS_SQL.format(clicks=clicks)).fetchall()))
    console.print(_table("dead letters by reason", ["reason", "events"],
                         con.execute(DEAD_LETTER_SQL.format(dead=dead)).fetchall()))
    valid_rows = con.execute(f"SELECT count(*) FROM {clicks}").fetchone()[0]
    dead_rows = con.execute(f"SELECT count(*) FROM {dead}").fetchone()[0]
    freshness = freshness_quantiles(spark, cat.clicks_table, since_ms)
    spark.stop()
    return DemoSummary(produced, committed, valid_rows, dead_rows, freshness)
