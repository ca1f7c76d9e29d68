"""`lakehouse bench peers`: this pipeline and other systems doing its job, one after another, measured alike.

Each run gets a fresh topic and a fresh table of the click table's layout, and the system
under test as a process of its own (so its CPU is its process tree's): this pipeline is
`lakehouse run clicks`; the peers are in ``lab/peers`` (docs/peers.md says how each is set
up). The benchmark warms the system up, produces ``rate`` events/s for ``duration`` seconds
with the project's rate producer, waits until every event is in the table, and reads from
the table alone:

- freshness p50/p95/p99: Kafka produce time (``produced_at``) -> commit time of the snapshot
  that added the row's file, for every row produced in the measured run;
- sustained events/s: the slope of the table's row count while the load ran;
- CPU seconds per million events of the system's processes (not the broker's, the object
  store's or the producer's, which every system shares);
- data files and snapshots committed per minute;
- exactly once: every (partition, offset) the producer wrote is in the table once.

Each system is tried at its own settings, longest interval first (its micro-batch trigger, or
Flink's checkpoint: how often it commits), and at each rate a shorter one only while the longer
kept up (``kept_up``): the search stops where the system stops keeping up. ``best_of`` then picks
each system's freshest setting that kept up, so the comparison printed is best against best, at
the same rate, in the same run.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka.admin import NewTopic

from deploy.local.services.broker import admin_client
from lab.bench.cdc import start_job_process
from lab.bench.freshness import added_rows, quantiles
from lab.bench.ingest import commit_rate
from lab.bench.process_cpu import CpuMeter, tree_cpu_seconds
from lab.bench.scratch import discard
from lab.peers import flink_setup
from lakehouse.catalog import pyiceberg_catalog
from lakehouse.errors import LakehouseError
from lakehouse.settings import Settings
from lakehouse.settings_env import settings_env

WARM_UP_EVENTS = 2_000
#: after the load stops, how long a system may take to commit what it was given; one that takes
#: longer did not keep up at that rate (its row says how far behind; its freshness counts only what arrived)
DRAIN_SECONDS = 180.0


class PeerFailed(LakehouseError):
    """A system under test stopped, or never committed what it was given."""


@dataclass(frozen=True)
class System:
    """One system at one setting: ``start(settings, topic, table, log)`` starts its process."""

    name: str  # as the table prints it: "this pipeline", "Spark Structured Streaming (trigger 60 s)"
    start: Callable[[Settings, str, str, Path], subprocess.Popen]
    family: str = ""  # the system without its setting: "Flink"; its runs are compared to find its best
    setting: float | None = None  # its interval in seconds (None: its default), tried longest first


@dataclass
class PeerResult:
    system: str
    rate: float
    produced: int
    p50_s: float
    p95_s: float
    p99_s: float
    sustained_eps: float
    cpu_s_per_million: float
    files_per_min: float
    snapshots_per_min: float
    rows: int
    distinct_offsets: int
    caught_up: bool = True
    topic: str = ""  # the run's own topic and table (dropped after the run unless kept)
    table: str = ""
    family: str = ""  # the system without its setting (``System.family``)

    @property
    def exactly_once(self) -> bool:
        return self.rows == self.distinct_offsets == self.produced

    @property
    def sound(self) -> bool:
        """Nothing doubled, and nothing lost by a system that caught up (one still behind may still be writing)."""
        return self.rows == self.distinct_offsets and (self.exactly_once or not self.caught_up)


def this_pipeline(trigger_seconds: float | None = None) -> System:
    """`lakehouse run clicks` at its defaults, or at another micro-batch interval (``pipeline.trigger_seconds``)."""
    def start(s: Settings, topic: str, table: str, log: Path) -> subprocess.Popen:
        s = _for(s, topic, table)
        if trigger_seconds is not None:
            s.pipeline.trigger_seconds = trigger_seconds
        return start_job_process(s, "clicks", log)
    return System("this pipeline" + (f" (trigger {trigger_seconds:g} s)" if trigger_seconds is not None else ""),
                  start, "this pipeline", trigger_seconds)


def clicks_arrow(trigger_seconds: float) -> System:
    """The click job's work without Spark, on one Python process (``lab.peers.clicks_arrow``)."""
    def start(s: Settings, topic: str, table: str, log: Path) -> subprocess.Popen:
        s = _for(s, topic, table)
        s.pipeline.trigger_seconds = trigger_seconds
        return start_job_process(s, "clicks", log, module="lab.peers.clicks_arrow")
    return System(f"the click job without Spark (lab/peers/clicks_arrow.py, trigger {trigger_seconds:g} s)", start,
                  "the click job without Spark", trigger_seconds)


def spark_structured_streaming(trigger_seconds: float) -> System:
    def start(s: Settings, topic: str, table: str, log: Path) -> subprocess.Popen:
        checkpoint = s.run_dir / "peers" / f"{table.replace('.', '_')}-checkpoint"
        with log.open("ab") as out:
            return subprocess.Popen(
                [sys.executable, "-m", "lab.peers.spark_streaming", topic, table, str(trigger_seconds), str(checkpoint)],
                env={**os.environ, **settings_env(s, with_secrets=True)}, stdout=out, stderr=subprocess.STDOUT,
                start_new_session=True)
    return System(f"Spark Structured Streaming (trigger {trigger_seconds:g} s)", start, "Spark Structured Streaming",
                  trigger_seconds)


def flink(checkpoint_seconds: float, parallelism: int = 2) -> System:
    """Seed 001's Flink job (``lab/peers/flink_job.py``) in a local mini-cluster, committing per checkpoint."""
    def start(s: Settings, topic: str, table: str, log: Path) -> subprocess.Popen:
        flink_setup.install(s.tools_dir)
        with log.open("ab") as out:  # Flink SQL cannot declare days(event_time): the table is made first
            made = subprocess.run([sys.executable, "-m", "lab.peers.click_table", table], stdout=out,
                                  stderr=subprocess.STDOUT, env={**os.environ, **settings_env(s, with_secrets=True)})
            if made.returncode != 0:
                raise PeerFailed(f"could not create the table {table} for Flink (exit {made.returncode}); see {log}")
            job = flink_setup.write_job(s, topic, table, checkpoint_seconds, parallelism)
            return subprocess.Popen(
                [str(flink_setup.python(s.tools_dir)), "-m", "lab.peers.flink_job", str(job)],
                env={**os.environ, **flink_setup.environment(s.tools_dir), "FLINK_LOG_DIR": str(log.parent)},
                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    return System(f"Flink (checkpoint {checkpoint_seconds:g} s)", start, "Flink", checkpoint_seconds)


def _for(s: Settings, topic: str, table: str) -> Settings:
    s = s.model_copy(deep=True)
    s.kafka.clicks_topic, s.catalog.clicks_table = topic, table
    s.catalog.dead_letter_table = f"{table}_dead"
    return s


def run_one(settings: Settings, system: System, rate: float, duration: float, progress=print,
            keep: bool = False) -> PeerResult:
    """One system at one rate (module docstring); its topic and tables are dropped after, unless ``keep``."""
    tag = f"{time.strftime('%Y%m%d%H%M%S')}_{abs(hash(system.name)) % 10_000:04d}"
    topic, table = f"peers_{tag}", f"bench.peers_{tag}"
    admin = admin_client(settings)  # held while its future resolves: a collected client fails it
    admin.create_topics([NewTopic(topic, settings.kafka.clicks_partitions, 1)])[topic].result()
    log = settings.run_dir / "logs" / f"bench-peers-{tag}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    process = system.start(settings, topic, table, log)
    try:
        progress(f"{system.name}: warming up ({WARM_UP_EVENTS:,} events; log {log})")
        sent = _produce(settings, topic, WARM_UP_EVENTS / 5, 5)
        _wait_rows(settings, table, sent, 300, process, log)
        meter = CpuMeter({"system": lambda: tree_cpu_seconds(process.pid)})
        since_ms, began = int(time.time() * 1000), time.monotonic()
        meter.start()
        progress(f"{system.name}: {rate:,.0f} events/s for {duration:.0f}s")
        producer = _start_producer(settings, topic, rate, duration)
        samples = []
        while producer.poll() is None:
            samples.append((time.monotonic() - began, _rows(settings, table)))
            _check(process, log)
            time.sleep(1.0)
        in_run = int((producer.communicate()[0] or "produced 0").split()[1])
        sent += in_run
        caught_up = _wait_rows(settings, table, sent, DRAIN_SECONDS, process, log, must=False)
        samples.append((time.monotonic() - began, _rows(settings, table)))
        cpu = meter.stop()["system"]
    finally:
        _stop(process)
    result = _read_back(settings, system.name, table, rate, duration, since_ms, sent, in_run, cpu, samples)
    result.caught_up, result.topic, result.table = caught_up, topic, table
    if not keep:
        catalog = pyiceberg_catalog(settings)
        tables = [t for t in (table, f"{table}_dead") if catalog.table_exists(t)]  # only this pipeline makes _dead
        for problem in discard(settings, tables, [topic]):
            progress(problem)
        for state in (settings.run_dir / "peers").glob(f"{table.replace('.', '_')}*"):  # checkpoints, job files
            shutil.rmtree(state) if state.is_dir() else state.unlink()
    return result


def _read_back(s: Settings, name: str, table: str, rate: float, duration: float, since_ms: int, sent: int,
               in_run: int, cpu: float, samples: list[tuple[float, int]]) -> PeerResult:
    iceberg = pyiceberg_catalog(s).load_table(table)
    delays, files, snapshots = [], 0, 0
    for snapshot in sorted(iceberg.snapshots(), key=lambda x: x.sequence_number):
        if snapshot.timestamp_ms < since_ms:
            continue
        snapshots += 1
        for rows in added_rows(iceberg, snapshot, ["produced_at"]):
            files += 1
            ms = [int(v) // 1000 for v in rows.column(0).cast("int64").to_pylist() if v is not None]  # micros -> ms
            delays += [snapshot.timestamp_ms - p for p in ms if p >= since_ms]
    keys = iceberg.scan(selected_fields=("kafka_partition", "kafka_offset")).to_arrow()
    distinct = keys.group_by(["kafka_partition", "kafka_offset"]).aggregate([]).num_rows
    p50, p95, p99 = (x / 1000 for x in quantiles(delays, (50, 95, 99))) if delays else (float("nan"),) * 3
    minutes = duration / 60
    return PeerResult(name, rate, sent, p50, p95, p99, commit_rate(samples), cpu / max(in_run, 1) * 1e6,
                      files / minutes, snapshots / minutes, keys.num_rows, distinct)


def _rows(s: Settings, table: str) -> int:
    try:
        snapshot = pyiceberg_catalog(s).load_table(table).current_snapshot()
    except Exception:  # noqa: BLE001 - not created yet: the system creates its table as it starts
        return 0
    summary = snapshot.summary.additional_properties if snapshot is not None and snapshot.summary else {}
    return int(summary.get("total-records", 0))


def _wait_rows(s: Settings, table: str, target: int, timeout: float, process: subprocess.Popen, log: Path,
               must: bool = True) -> bool:
    """Until ``table`` holds ``target`` rows: True; after ``timeout``, False (or PeerFailed if ``must``)."""
    deadline = time.monotonic() + timeout
    while _rows(s, table) < target:
        _check(process, log)
        if time.monotonic() > deadline:
            if not must:
                return False
            raise PeerFailed(f"{table} holds {_rows(s, table):,} of the {target:,} events produced after "
                             f"{timeout:.0f}s; see {log}")
        time.sleep(0.5)
    return True


def _check(process: subprocess.Popen, log: Path) -> None:
    if process.poll() is not None:
        tail = log.read_text(errors="replace").splitlines()[-15:] if log.exists() else []
        raise PeerFailed(f"the system under test exited ({process.returncode}); its log {log} ends:\n" + "\n".join(tail))


def _stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(10)


def _start_producer(s: Settings, topic: str, rate: float, duration: float) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "lab.bench.rate_producer", "--rate", str(rate), "--duration",
                             str(duration), "--topic", topic], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, **settings_env(s)})


def _produce(s: Settings, topic: str, rate: float, duration: float) -> int:
    out, _ = _start_producer(s, topic, rate, duration).communicate()
    return int((out or "produced 0").split()[1])


#: a run kept up when it committed everything in time and its committed rate was at least this share of the produced
KEPT_UP_SHARE = 0.98


def kept_up(r: PeerResult) -> bool:
    """Whether the system kept up at that setting: every event committed once, within the drain time, at a
    committed rate of at least ``KEPT_UP_SHARE`` of the produced one."""
    return r.exactly_once and r.caught_up and r.sustained_eps >= KEPT_UP_SHARE * r.rate


def longest_first(systems: list[System]) -> list[System]:
    """The systems in their given order of families, each family's settings longest first (its default first)."""
    order = list(dict.fromkeys(s.family or s.name for s in systems))
    return sorted(systems, key=lambda s: (order.index(s.family or s.name),
                                          -(s.setting if s.setting is not None else float("inf"))))


def run(settings: Settings, systems: list[System], rates: list[float], duration: float,
        progress=print, keep: bool = False) -> list[PeerResult]:
    """Every system at every rate, one after another on the same stack; a family's shorter settings only while
    its longer ones kept up."""
    results = []
    for rate in rates:
        behind: set[str] = set()
        for system in longest_first(systems):
            family = system.family or system.name
            if family in behind:
                progress(f"{system.name}: not run at {rate:,.0f} events/s: a longer setting did not keep up")
                continue
            result = run_one(settings, system, rate, duration, progress, keep)
            result.family = family
            results.append(result)
            if not kept_up(result):
                behind.add(family)
    return results


def best_of(results: list[PeerResult]) -> list[PeerResult]:
    """Each family's freshest run (lowest p95) that kept up, at each rate: the runs to compare."""
    best: dict[tuple[float, str], PeerResult] = {}
    for r in results:
        key = (r.rate, r.family or r.system)
        if kept_up(r) and (key not in best or r.p95_s < best[key].p95_s):
            best[key] = r
    return list(best.values())


def best_line(r: PeerResult, others: list[PeerResult]) -> dict[str, str]:
    """One row of the best-against-best table: the family's best run and its p95 beside the best other's."""
    rivals = [o.p95_s for o in others if o.rate == r.rate and (o.family or o.system) != (r.family or r.system)]
    ratio = f"{r.p95_s / min(rivals):.2f}x" if rivals and min(rivals) > 0 else ""
    return {"system": r.family or r.system, "its best setting": r.system, "events/s": f"{r.rate:,.0f}",
            "p50 (s)": f"{r.p50_s:.2f}", "p95 (s)": f"{r.p95_s:.2f}", "p99 (s)": f"{r.p99_s:.2f}",
            "CPU s / M events": f"{r.cpu_s_per_million:,.0f}", "p95 / best other's": ratio}


def result_line(r: PeerResult) -> dict[str, str]:
    """One row of the printed table (p50, p95 and p99 in that order)."""
    return {"system": r.system, "events/s": f"{r.rate:,.0f}", "p50 (s)": f"{r.p50_s:.2f}", "p95 (s)": f"{r.p95_s:.2f}",
            "p99 (s)": f"{r.p99_s:.2f}", "sustained/s": f"{r.sustained_eps:,.0f}",
            "CPU s / M events": f"{r.cpu_s_per_million:,.0f}", "files/min": f"{r.files_per_min:,.1f}",
            "snapshots/min": f"{r.snapshots_per_min:,.1f}", "exactly once": _once(r)}


def _once(r: PeerResult) -> str:
    if r.exactly_once:
        return "yes"
    if r.sound:
        return f"did not keep up: {r.produced - r.rows:,} of {r.produced:,} not in {DRAIN_SECONDS:.0f}s, none doubled"
    return f"NO ({r.rows:,} rows, {r.distinct_offsets:,} offsets, {r.produced:,} produced)"
