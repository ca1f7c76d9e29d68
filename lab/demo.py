"""`make demo`: the lakehouse's story on the local stack, start to finish.

Starts the binlog capture (its first run snapshots MariaDB), then one Spark application
running the dimension apply, the click ingestion and the live aggregates (FAIR pools),
as ``lab.system_jobs`` starts them. Locust produces ClickEvents (with a share of
deliberately bad ones) at a steady rate and changes the shop database while progress is
shown; a third of the way in, product 1's price is changed. The events play an app release too:
its first users' events (in the warm-up) carry a field beyond the contract, deviceType, and
the click table gains the column in the batch that first carries it; the load then rolls the
release out to 10 % -> 100 % of the events. (The batch that evolves the table stalls ingestion
once for a few seconds, docs/schema-evolution.md: like the JVM's start-up, it is kept out of
the measured run.) When every produced event is
committed it prints what a data engineer wants to see: the top products before and after
the update (live aggregates), how clicks on product 1 picked up the new price, dead
letters by reason, freshness per table against its goal, and where to look next.
"""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from deploy.local.stack import LocalStack
from lab.bench import freshness
from lab.bench.ingest import warm_up
from lab.report import PrometheusError, write_report
from lab.system_jobs import RunningSystem
from lab.trino_session import CliResult, product_price, run_cli, seed_statements
from lakehouse.catalog import pyiceberg_catalog
from lakehouse.settings import Settings, results_path
from lakehouse.source_database import connect as mariadb_connect
from loadgen.db_changes import STORY_PRODUCT_ID
from loadgen.run import command, expected_events, read_result
from pipeline.clicks.evolving_batch import HISTORY_PROPERTY
from pipeline.metrics import serve
from queries import library, output
from queries.duckdb_engine import DuckDBEngine

PRODUCT_ONE_SQL = """
SELECT name, product_price, count(*) AS views, min(ingest_time) AS first_seen, max(ingest_time) AS last_seen
FROM {clicks} WHERE productId = '1' AND produced_at >= from_unixtime(%d) GROUP BY name, product_price
ORDER BY first_seen
"""
#: the app release the demo plays: a field beyond the ClickEvent contract, reaching 10 % -> 100 % of the events
NEW_FIELD, ROLLOUT = "deviceType:string", "10%->100%"
DEVICE_SQL = """
SELECT coalesce(deviceType, '(not sent)') AS deviceType, count(*) AS views
FROM {clicks} WHERE produced_at >= from_unixtime(%d) GROUP BY 1 ORDER BY views DESC
"""
SEED_UPDATE = ("UPDATE products SET description = 'test666', product_price = 8.1 "
               f"WHERE productId = '{STORY_PRODUCT_ID}'")


@dataclass
class DemoSummary:
    produced: int
    committed: int
    valid_rows: int
    dead_rows: int
    freshness: list[freshness.Freshness]
    report_dir: Path
    schema_changes: list[str]
    trino_session: CliResult | None = None
    trino_price: CliResult | None = None


def _schema_changes_since(settings: Settings, since_ms: int) -> list[str]:
    """The click table's evolutions committed during the run, as `lakehouse contract history` shows them."""


    table = pyiceberg_catalog(settings).load_table(settings.catalog.clicks_table)
    since = dt.datetime.fromtimestamp(since_ms / 1000, dt.timezone.utc)
    return [f"{c['change']} {c['field']} {c['type']}"
            for entry in json.loads(table.properties.get(HISTORY_PROPERTY, "[]"))
            if dt.datetime.fromisoformat(entry["at"]) >= since for c in entry["changes"]]


def _aggregates_caught_up(engine, expected_views: int) -> bool:
    total = engine.run("SELECT coalesce(sum(views), 0) AS v FROM {product_views}").column("v")[0].as_py()
    return total >= expected_views


def run_demo(settings: Settings, rate: float, duration: float, bad_share: float, console: Console,
             change_rate: float = 20.0) -> DemoSummary:

    # The demo shows a price change arriving within seconds: the click job re-reads the dimensions
    # every 2 s here (the product default, 10 s, can miss a change made in a short run's second half).
    settings = settings.model_copy(deep=True)
    settings.pipeline.dimension_refresh_seconds = min(settings.pipeline.dimension_refresh_seconds, 2.0)
    serve(settings.metrics.host, settings.metrics.pipeline_port)
    jobs = RunningSystem(settings, console, "lakehouse-demo", settings.run_dir / "logs" / "demo-capture.log")
    console.log("dimensions applied from the CDC topics; click ingestion and live aggregates running")
    began_ms = int(time.time() * 1000)
    with console.status("warming up (first batch compiles; the app release's first users send deviceType)..."):
        for _ in range(2):  # the first batch may evolve the table (written by the driver): the second is Spark's
            warm_up(jobs.clicks, settings, events=200, extra={"deviceType": "ios"})
    start_offsets, topic_start, since_ms = jobs.committed(), jobs.produced(), int(time.time() * 1000)
    report_dir = results_path("demo")
    report_dir.mkdir(parents=True, exist_ok=True)
    locust = subprocess.Popen(command(rate, duration, "constant", bad_share, 4, 1, change_rate, report_dir,
                                      new_fields=(NEW_FIELD,), rollout=ROLLOUT),
                              stdout=subprocess.DEVNULL, stderr=(report_dir / "locust.log").open("w"))
    engine = DuckDBEngine(settings)
    expected = int(expected_events("constant", rate, duration))
    columns = [TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed:,.0f}/{task.total:,.0f}"),
               TimeElapsedColumn()]
    before, produced = None, None
    with Progress(*columns, console=console) as progress:
        produced_task = progress.add_task("produced (Locust)", total=expected)
        committed_task = progress.add_task("committed        ", total=expected)
        began = time.monotonic()
        while True:
            elapsed = time.monotonic() - began
            # A third of the way in: events are enriched as of when they are processed, and they are processed
            # within ~2 s, so the new price shows on the events produced once CDC has applied it and the click
            # job re-read it (a few seconds): at half-time a short run could end first.
            if before is None and elapsed >= duration / 3:
                before = engine.run(library.load("top_products").template)
                with mariadb_connect(settings, user=settings.mariadb.app_user,
                                     database=settings.mariadb.database) as conn, conn.cursor() as cur:
                    cur.execute(SEED_UPDATE)
                progress.console.log(f"MariaDB: {SEED_UPDATE}")
            committed = jobs.committed() - start_offsets
            progress.update(committed_task, completed=committed)
            if produced is None:
                progress.update(produced_task, completed=min(expected, rate * elapsed))
                if locust.poll() is not None:
                    read_result(report_dir, expected, duration)  # fails clearly if Locust wrote no statistics
                    produced = jobs.produced() - topic_start
                    progress.update(produced_task, total=produced, completed=produced)
                    progress.update(committed_task, total=produced)
            elif committed >= produced or elapsed > duration + 120:
                break
            time.sleep(0.5)
    valid_committed = jobs.spark.table(settings.catalog.clicks_table).count()
    jobs_columns = jobs.spark.table(settings.catalog.clicks_table).columns  # no deviceType under policy ignore/strict
    with console.status("waiting for the live aggregates to catch up..."):
        deadline = time.monotonic() + 60
        while not _aggregates_caught_up(engine, valid_committed) and time.monotonic() < deadline:
            time.sleep(1)
    committed = jobs.committed() - start_offsets
    jobs.close()

    top = library.load("top_products")
    show = [
        (f"top products before the price update ({top.description})", before),
        ("top products after the price update", engine.run(top.template)),
        ("product 1 in the live aggregates: one row per price it was viewed at", engine.run(
            "SELECT productId, name, product_price, views, unique_users FROM {product_views} "
            "WHERE productId = '1' ORDER BY updated_at")),
        ("clicks on product 1: the price change arrived through CDC mid-run",
         engine.run(PRODUCT_ONE_SQL % (since_ms // 1000))),
        ("dead letters by reason", engine.run(library.load("dead_letter_reasons").template)),
    ]
    if "deviceType" in jobs_columns:
        show.append((f"an app release: deviceType, a column since its first users' events (warm-up), then {ROLLOUT} "
                     "of the load", engine.run(DEVICE_SQL % (since_ms // 1000))))
    for title, result in show:
        output.write(result, "table", console, title=title)
    changes = _schema_changes_since(settings, began_ms)
    counts = engine.run("SELECT (SELECT count(*) FROM {clicks}) AS valid, (SELECT count(*) FROM {dead_letter}) AS dead")
    with console.status("measuring freshness per table..."):
        fresh = [freshness.clicks(jobs.spark, settings.catalog.clicks_table, since_ms),
                 freshness.dimensions(jobs.spark, settings, since_ms),
                 freshness.aggregates(jobs.spark, settings, since_ms)]
    try:
        with console.status("plotting the run from Prometheus..."):
            page = write_report(settings, report_dir / "report", time.time() - since_ms / 1000 + 30, fresh)
        console.log(f"report with plots: {page}")
    except PrometheusError as exc:
        console.log(f"no report: {exc}")
    jobs.spark.stop()
    return DemoSummary(produced or 0, committed, counts.column("valid")[0].as_py(), counts.column("dead")[0].as_py(),
                       fresh, report_dir, changes)


def trino_ending(settings: Settings, console: Console) -> tuple[CliResult, CliResult]:
    """The card's own ending: Trino 476 started on first use, then seed 001's session in the real CLI.

    It runs after the measured part (``run_demo``), so a failure here still leaves a summary to print.
    """
    with console.status("Trino 476: starting on first use (about 15 s)..."):
        took = LocalStack(settings).ensure("trino")
    if took:
        console.log(f"Trino ready in {took:.1f}s")
    statements = seed_statements(settings)
    with console.status("Trino CLI: " + " ".join(statements.split())):
        session = run_cli(settings, statements)
        price = product_price(settings, STORY_PRODUCT_ID)
    shown = ["event_id", "uid", "productid", "name", "product_price", "event_time"]
    keep = [i for i, name in enumerate(session.header) if name.lower() in shown]
    table = Table(title=f"trino> {' '.join(statements.split())}   ({len(session.rows)} rows; first 5, "
                        f"{len(keep)} of {len(session.header)} columns)")
    for i in keep:
        table.add_column(session.header[i])
    for row in session.rows[:5]:
        table.add_row(*(row[i] for i in keep))
    console.print(table)
    price_table = Table(title=f"trino> {price.statements.strip()}")
    for name in price.header:
        price_table.add_column(name)
    for row in price.rows:
        price_table.add_row(*row)
    console.print(price_table)
    return session, price
