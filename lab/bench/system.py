"""`lakehouse bench system`: the whole system under load, freshness per table and exactly-once checks.

Everything runs the way `make demo` runs it (``lab.system_jobs``): the binlog capture,
the dimension apply, the click ingestion and the live aggregates, on the stack's own broker,
with Locust producing ClickEvents (1 % deliberately bad) and changing the shop database at
the same time. The run gets topics, tables and a source database of its own, so its counts
are exact and the stack's data is left alone.

At the end it waits until every produced event is committed, the dimensions equal the
database and the aggregates count every click, then reports freshness per table
(``lab.bench.freshness``) and the exactly-once checks:
- every produced record is in the click table or the dead letters, none twice;
- the Iceberg dimensions hold exactly the database's rows;
- each live aggregate counts every click row once.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from deploy.local.services.broker import Broker
from deploy.local.services.mariadb import create_source_database
from lab.bench import freshness
from lab.bench.ingest import bench_settings, commit_rate, warm_up
from lab.bench.process_cpu import CpuMeter, process_cpu_seconds, service_cpu, tree_cpu_seconds
from lab.reconcile import differences, lake_rows, source_rows
from lab.system_jobs import RunningSystem
from lakehouse.errors import LakehouseError
from lakehouse.settings import Settings
from lakehouse.settings_env import settings_env
from loadgen.run import command, read_summary


@dataclass
class Check:
    name: str
    ok: bool
    detail: str


@dataclass
class SystemBenchResult:
    rate: float
    change_rate: float
    duration_s: float
    produced: int
    committed: int
    sustained_eps: float
    changes: int
    freshness: list[freshness.Freshness] = field(default_factory=list)
    checks: list[Check] = field(default_factory=list)
    cpu_cores: dict[str, float] = field(default_factory=dict)  # each part's CPU under load, in cores

    @property
    def exact(self) -> bool:
        return all(c.ok for c in self.checks)

    def save(self, out_dir: Path) -> Path:
        path = out_dir / "bench-system.json"
        path.write_text(json.dumps({**asdict(self), "exact": self.exact}, indent=2))
        return path


def system_settings(settings: Settings, tag: str) -> Settings:
    """Topics, tables, a source database and checkpoints of the run's own."""
    s = bench_settings(settings, tag, kind="system")
    s.mariadb.database = f"shop_system_{tag}"
    s.kafka.cdc_topic_prefix = f"cdc_system_{tag}"
    c = s.catalog
    c.products_table, c.members_table = f"system.products_{tag}", f"system.members_{tag}"
    c.product_views_table, c.member_activity_table = f"system.product_views_{tag}", f"system.member_activity_{tag}"
    return s


def _scalar(spark, sql: str) -> int:
    return int(spark.sql(sql).first()[0] or 0)


def _wait(what: str, done, timeout: float, console: Console) -> bool:
    with console.status(f"waiting for {what}..."):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if done():
                return True
            time.sleep(1)
    console.log(f"[red]{what}: not reached within {timeout:.0f} s[/red]")
    return False


def _locust(s: Settings, rate: float, change_rate: float, duration: float, out_dir: Path) -> subprocess.Popen:
    env = {**os.environ, **settings_env(s, with_secrets=True)}
    return subprocess.Popen(command(rate, duration, "constant", 0.01, 4, 1, change_rate, out_dir), env=env,
                            stdout=subprocess.DEVNULL, stderr=(out_dir / "locust.log").open("w"))


def _cpu_meter(system: RunningSystem, locust: subprocess.Popen, s: Settings) -> CpuMeter:
    """CPU by part: each job's process tree (driver, JVM, Python workers), the load generator, each service."""
    jvm = getattr(system.spark.sparkContext._gateway, "proc", None)  # None when PySpark joined a running JVM
    return CpuMeter({
        "click ingestion + live aggregates":
            lambda: process_cpu_seconds() + (tree_cpu_seconds(jvm.pid) if jvm is not None else 0.0),
        "dimension apply": lambda: tree_cpu_seconds(system.dims.pid),
        "binlog capture": lambda: tree_cpu_seconds(system.capture.pid),
        "load generator (Locust)": lambda: tree_cpu_seconds(locust.pid),
        "broker": service_cpu(s.kafka.port),
        "object store": service_cpu(s.s3.port),
        "metastore": service_cpu(s.metastore.port),
        "source database": service_cpu(s.mariadb.port),
    })


#: the CPU window leaves out Locust's ramp-up and its last seconds (the meter reads a finished process as 0)
CPU_WINDOW_MARGIN_S = 10.0


def _drive(system: RunningSystem, locust: subprocess.Popen, rate: float, duration: float,
           console: Console, cpu: dict[str, float]) -> tuple[list[tuple[float, int]], int]:
    """Progress while Locust runs: (committed-count samples, records produced); each part's CPU in cores, from
    ``CPU_WINDOW_MARGIN_S`` (at most a quarter of the run) after the start to as long before its end, into ``cpu``."""
    columns = [TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed:,.0f}/{task.total:,.0f}"),
               TimeElapsedColumn()]
    samples: list[tuple[float, int]] = []
    start = system.committed()
    meter = _cpu_meter(system, locust, system.settings)
    metered_from: float | None = None  # when the meter started
    margin = min(CPU_WINDOW_MARGIN_S, duration / 4)
    with Progress(*columns, console=console) as progress:
        produced_bar = progress.add_task("produced (Locust)", total=rate * duration)
        committed_bar = progress.add_task("committed        ", total=rate * duration)
        began = time.monotonic()
        while locust.poll() is None:
            elapsed = time.monotonic() - began
            if metered_from is None and elapsed >= margin:
                meter.start()
                metered_from = elapsed
            elif metered_from is not None and not cpu and elapsed >= duration - margin:
                cpu.update({part: seconds / (elapsed - metered_from) for part, seconds in meter.stop().items()})
            samples.append((elapsed, system.committed() - start))
            progress.update(produced_bar, completed=min(rate * duration, rate * elapsed))
            progress.update(committed_bar, completed=samples[-1][1])
            if (failure := system.failed()) is not None:
                locust.terminate()
                raise LakehouseError(f"the system stopped under load: {failure}")
            time.sleep(0.5)
        samples.append((time.monotonic() - began, system.committed() - start))
        produced = system.produced()
        progress.update(produced_bar, total=produced, completed=produced)
        progress.update(committed_bar, total=produced, completed=samples[-1][1])
    return samples, produced


def _checks(spark, s: Settings, produced: int) -> list[Check]:
    c = s.catalog
    rows = _scalar(spark, f"SELECT count(*) FROM {c.clicks_table}")
    dead = _scalar(spark, f"SELECT count(*) FROM {c.dead_letter_table}")
    distinct = _scalar(spark, f"SELECT count(DISTINCT kafka_partition, kafka_offset) FROM "
                              f"(SELECT kafka_partition, kafka_offset FROM {c.clicks_table} UNION ALL "
                              f"SELECT kafka_partition, kafka_offset FROM {c.dead_letter_table})")
    diff = differences(source_rows(s), lake_rows(spark, s))
    checks = [
        Check("clicks: nothing lost", rows + dead == produced,
              f"{produced:,} produced; {rows:,} rows + {dead:,} dead letters"),
        Check("clicks: nothing twice", distinct == rows + dead, f"{distinct:,} distinct Kafka records committed"),
        Check("dimensions equal the database", not any(diff.values()),
              "; ".join(f"{t}: {len(d)} rows differ" for t, d in diff.items() if d) or "every row equal"),
    ]
    for table in (c.product_views_table, c.member_activity_table):
        views = _scalar(spark, f"SELECT sum(views) FROM {table}")
        checks.append(Check(f"aggregates: {table} counts each click once", views == rows,
                            f"{views:,} views for {rows:,} click rows"))
    return checks


def run(settings: Settings, rate: float, change_rate: float, duration: float, out_dir: Path,
        console: Console) -> SystemBenchResult:

    tag = time.strftime("%Y%m%d%H%M%S")
    s = system_settings(settings, tag)
    create_source_database(s, s.mariadb.database)
    Broker(s).bootstrap()
    system = RunningSystem(s, console, "lakehouse-bench-system", out_dir / "capture.log")
    try:
        with console.status("warming up (the first batches compile and start Python workers)..."):
            warm_up(system.clicks, s, events=500)
        console.log(f"producing {rate:,.0f} events/s and {change_rate:g} database changes/s for {duration:.0f} s "
                    f"(topic {s.kafka.clicks_topic}, database {s.mariadb.database})")
        since_ms = int(time.time() * 1000)
        locust = _locust(s, rate, change_rate, duration, out_dir)
        cpu: dict[str, float] = {}
        samples, produced = _drive(system, locust, rate, duration, console, cpu)
        c = s.catalog
        spark = system.spark
        _wait("every produced event to be committed", lambda: system.committed() >= produced, 180, console)
        _wait("the dimensions to equal the database", lambda: lake_rows(spark, s) == source_rows(s), 120, console)
        rows = _scalar(spark, f"SELECT count(*) FROM {c.clicks_table}")
        _wait("the live aggregates to count every click",
              lambda: _scalar(spark, f"SELECT sum(views) FROM {c.member_activity_table}") >= rows, 120, console)
    finally:
        system.close()
    result = SystemBenchResult(rate, change_rate, duration, produced, system.committed(), commit_rate(samples),
                               _changes(out_dir), cpu_cores=cpu)
    with console.status("measuring freshness per table and checking exactly-once..."):
        result.freshness = [freshness.clicks(spark, c.clicks_table, since_ms),
                            freshness.dimensions(spark, s, since_ms),
                            freshness.aggregates(spark, s, since_ms)]
        result.checks = _checks(spark, s, produced)
    spark.stop()
    return result


def _changes(out_dir: Path) -> int:
    """Database changes Locust made (its statistics count each as a request of type 'mysql')."""
    return sum(k["delivered"] for k in read_summary(out_dir).values() if k["type"] == "mysql")
