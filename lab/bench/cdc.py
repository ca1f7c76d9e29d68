"""CDC benchmark: sustained changes/s and apply freshness (database commit -> visible in Iceberg).

The workload mixes updates of existing rows with inserts of new ones; each insert
carries its database commit time (ms) in ``description``. Freshness is read the way a
reader sees it: the commit time of the Iceberg snapshot that added the row's data
file minus that database commit time.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from deploy.local.services.broker import Broker
from deploy.local.services.mariadb import create_source_database
from lab.bench.freshness import first_visible, quantiles
from lab.bench.ingest import commit_rate
from lab.bench.scratch import discard
from lab.peers import cdc_flink
from lab.peers.cdc_merge import MergeApplyJob
from lab.peers.cdc_python import PythonApplyJob
from lakehouse.catalog import pyiceberg_catalog
from lakehouse.errors import LakehouseError
from lakehouse.settings import Settings
from lakehouse.settings_env import settings_env
from lakehouse.source_database import connect
from pipeline.capture.checkpoints import read_checkpoint
from pipeline.cdc.apply import DimensionApplyJob
from pipeline.runner import run_loop
from pipeline.spark_session import build_session


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


def discard_cdc_world(s: Settings) -> None:
    """The run's database, CDC topics and dimension tables (``lab.bench.scratch``), and a Flink peer's checkpoints."""
    discard(s, [s.catalog.products_table, s.catalog.members_table],
            [s.cdc_topic(t) for t in s.cdc_tables] + [s.cdc_position_topic], s.mariadb.database)
    shutil.rmtree(cdc_flink.checkpoints(s), ignore_errors=True)
    cdc_flink.job_file(s).unlink(missing_ok=True)


def write_changes(s: Settings, rate: float, duration: float, tick: float = 0.02, name: str = "bench") -> int:
    """Paced changes: half inserts (timestamped, named ``name``), half updates; commits every tick."""
    rng, sent, began = random.Random(1), 0, time.monotonic()
    with connect(s, user=s.mariadb.app_user, database=s.mariadb.database) as conn, conn.cursor() as cur:
        conn.autocommit(False)
        while (elapsed := time.monotonic() - began) < duration:
            due = int(rate * elapsed) - sent
            now_ms = int(time.time() * 1000)
            for _ in range(max(0, due)):
                if sent % 2 == 0:
                    cur.execute("INSERT INTO products (productId, name, description, product_price) VALUES "
                                "(%s, %s, %s, 1)", (f"{name[0]}{sent}", name, str(now_ms)))
                else:
                    cur.execute("UPDATE products SET product_price = %s WHERE productId = %s",
                                (rng.randrange(100, 99_999) / 100, str(rng.randint(1, 9))))
                sent += 1
            conn.commit()
            time.sleep(tick)
    return sent


def freshness(settings: Settings, table: str, since_ms: int) -> tuple[float, float]:
    """p50 and p95 of database commit -> first snapshot holding the inserted row (``first_visible``)."""
    iceberg = pyiceberg_catalog(settings).load_table(table)
    rows = iceberg.scan(row_filter="name == 'bench'", selected_fields=("productId", "description")).to_arrow()
    first = first_visible(iceberg, ("productId", "description"), since_ms)
    delays = [first[(key, db_ms)] - int(db_ms)
              for key, db_ms in zip(rows.column("productId").to_pylist(), rows.column("description").to_pylist(),
                                    strict=True) if (key, db_ms) in first]
    if not delays:
        return float("nan"), float("nan")
    p50, p95 = (x / 1000 for x in quantiles(delays, (50, 95)))
    return p50, p95


def _wait_for_inserts(spark, table: str, name: str, inserted: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if spark.sql(f"SELECT count(*) FROM {table} WHERE name = '{name}'").first()[0] >= inserted:
            return
        time.sleep(0.5)


def free_port(host: str) -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def start_capture(s: Settings, log_path: Path) -> subprocess.Popen:
    """The capture as its own process, the way every runtime runs it (`lakehouse run cdc`).

    In a thread of the benchmark it shared one interpreter lock with the change writer and
    the Spark driver: the writer fell short of 1,000 changes/s and the figures measured the
    benchmark, not the pipeline.
    """
    return start_job_process(s, "cdc", log_path)


def start_job_process(s: Settings, job: str, log_path: Path, port: int | None = None,
                      module: str | None = None) -> subprocess.Popen:
    """`lakehouse run <job>` as a process of its own, with ``s`` and its metrics on ``port`` (default: a free
    one, beside a running stack's); ``module``: `python -m <module>` in its place (a peer of the job)."""
    port_setting = {"cdc": "CDC_PORT", "dims": "PIPELINE_PORT", "clicks": "PIPELINE_PORT", "aggregate": "AGGREGATE_PORT"}[job]
    env = {**os.environ, **settings_env(s, with_secrets=True),
           f"LAKEHOUSE_METRICS__{port_setting}": str(port or free_port(s.metrics.host))}
    with log_path.open("ab") as log:
        command = ["-m", module] if module else ["-m", "cli.main", "run", job, "--log-level", "info"]
        return subprocess.Popen([sys.executable, *command],
                                env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)


def run(settings: Settings, rate: float, duration: float, progress=print, keep: bool = False,
        apply: str = "pipeline") -> CdcBenchResult:
    """The run on a database, topics and tables of its own, removed at the end unless ``keep``; ``apply``:
    "pipeline" (the CDC apply job), "merge-peer" (``lab.peers.cdc_merge``) or "python-peer" (``lab.peers.cdc_python``)."""
    s = bench_settings(settings, time.strftime("%Y%m%d%H%M%S"))
    create_source_database(s, s.mariadb.database)
    Broker(s).bootstrap()
    stop = threading.Event()
    log_path = s.run_dir / "logs" / f"bench-cdc-capture-{s.mariadb.database}.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    capture = start_capture(s, log_path)
    try:
        deadline = time.monotonic() + 120
        while read_checkpoint(s) is None:
            if capture.poll() is not None or time.monotonic() > deadline:
                raise LakehouseError(f"the capture did not start; its log: {log_path}")
            time.sleep(0.2)
        spark = build_session(s, "lakehouse-bench-cdc")
        job = {"merge-peer": MergeApplyJob, "python-peer": PythonApplyJob}.get(apply, DimensionApplyJob)(spark, s)
        loop = threading.Thread(target=run_loop, args=(job, s.pipeline.dims_trigger_seconds, stop), daemon=True)
        loop.start()
        # The first MERGEs load and compile most of Spark's and Iceberg's code (15 s each, measured):
        # start-up, not the steady state this benchmark is about.
        warm = write_changes(s, 200, 2.0, name="warmup")
        _wait_for_inserts(spark, s.catalog.products_table, "warmup", (warm + 1) // 2, 300)
        progress(f"warm; writing {rate:,.0f} changes/s for {duration:.0f}s to {s.mariadb.database}")
        began, since_ms = time.monotonic(), int(time.time() * 1000)
        written: list[int] = []
        writer = threading.Thread(target=lambda: written.append(write_changes(s, rate, duration)), daemon=True)
        writer.start()
        topic = s.cdc_topic("products")
        samples = []  # (seconds since start, changes applied) while the changes are written
        while writer.is_alive():
            samples.append((time.monotonic() - began, sum(job.committed.get(topic, {}).values())))
            time.sleep(0.5)
        samples.append((time.monotonic() - began, sum(job.committed.get(topic, {}).values())))
        changes = written[0] if written else 0
        _wait_for_inserts(spark, s.catalog.products_table, "bench", (changes + 1) // 2, 180)
        applied = time.monotonic() - began
        stop.set()
        loop.join(60)
        job.close()
    finally:
        capture.send_signal(signal.SIGTERM)
        try:
            capture.wait(30)
        except subprocess.TimeoutExpired:
            capture.kill()
    p50, p95 = freshness(s, s.catalog.products_table, since_ms)
    spark.stop()
    if not keep:
        discard_cdc_world(s)
    return CdcBenchResult(rate, duration, changes, applied, commit_rate(samples), p50, p95)
