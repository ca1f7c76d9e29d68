"""Ingest benchmark: sustained rate and freshness of the click pipeline, against a raw ceiling.

Freshness is measured the way a reader experiences it: for every row, the commit time
of the Iceberg snapshot that added its data file minus the Kafka produce timestamp.
The raw ceiling reads the same events from Kafka and writes Parquet with no Spark at
all (confluent-kafka + pyarrow), which says what the machine could do at best.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import cast

import pyarrow as pa
import pyarrow.parquet as pq
from confluent_kafka import KafkaError, TopicPartition
from confluent_kafka.admin import NewTopic
from prometheus_client import REGISTRY

from deploy.local.services.broker import admin_client
from lab.bench.freshness import clicks as clicks_freshness
from lab.bench.process_cpu import (
    CpuMeter,
    PeakRss,
    process_cpu_seconds,
    python_workers,
    service_cpu,
    tree_cpu_seconds,
)
from lab.bench.rate_producer import produce_at_rate
from lab.bench.scratch import discard
from lakehouse import kafka_clients
from lakehouse.settings import Settings
from pipeline.clicks.job import ClickIngestJob
from pipeline.runner import run_loop
from pipeline.spark_session import build_session


@dataclass
class IngestBenchResult:
    target_rate: float
    duration_s: float
    produced: int
    committed: int
    sustained_eps: float
    freshness_p50_s: float
    freshness_p95_s: float
    freshness_p99_s: float
    batches: int
    batch_mean_s: float
    raw_ceiling_eps: float
    drain_s: float = 0.0  # from the end of the load until the last event was committed: the lag it left
    produced_rate: float = 0.0  # events/s the producer achieved in the measured run (no warm-up)
    #: CPU seconds per million events of the measured run, by part: the pipeline (driver, JVM, Python
    #: workers), the load generator, and the services it used (broker, object store, metastore)
    cpu_per_million: dict[str, float] = field(default_factory=dict)
    #: peak resident memory (MiB) of the driver, the JVM (driver and executor: local mode) and the Python workers
    peak_rss_mb: dict[str, float] = field(default_factory=dict)
    #: with ``profile``: where a batch's time went, mean seconds a batch by phase (``batch_phases``)
    breakdown: dict[str, float] | None = None

    @property
    def ratio(self) -> float:
        return self.sustained_eps / self.raw_ceiling_eps if self.raw_ceiling_eps else 0.0


def bench_settings(settings: Settings, tag: str, kind: str = "bench") -> Settings:
    """A topic and click/dead-letter tables of the run's own (``kind`` names them: bench, soak)."""
    s = settings.model_copy(deep=True)
    s.kafka.clicks_topic = f"{kind}_{tag}"
    s.catalog.clicks_table = f"{kind}.clickevent_{tag}"
    s.catalog.dead_letter_table = f"{kind}.dead_letter_{tag}"
    return s


def raw_ceiling(settings: Settings, topic: str, partitions: int, out_dir: Path) -> float:
    """Events/s to consume the topic from the start and write Parquet, without Spark."""
    consumer = kafka_clients.reader(settings.kafka.bootstrap, "bench-raw")
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    began, n, chunk = time.monotonic(), 0, []
    eof: set[int] = set()
    writer = None
    while len(eof) < partitions:
        for msg in consumer.consume(10_000, timeout=1.0):
            if (error := msg.error()) is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    eof.add(cast(int, msg.partition()))
                continue
            eof.discard(msg.partition())
            chunk.append(cast(bytes, msg.value()))
        if len(chunk) >= 50_000 or (len(eof) == partitions and chunk):
            table = pa.Table.from_pylist([json.loads(v) for v in chunk])
            if writer is None:
                writer = pq.ParquetWriter(out_dir / "raw.parquet", table.schema, compression="zstd")
            writer.write_table(table.cast(writer.schema))
            n += len(chunk)
            chunk = []
    if writer:
        writer.close()
    consumer.close()
    return n / (time.monotonic() - began)


def committed_total(job, topic: str) -> int:
    return sum(job.committed.get(topic, {}).values())


def warm_up(job, settings: Settings, events: int = 2000, timeout: float = 120.0, extra: dict | None = None):
    """Produce a few events and wait for their commit, so JVM and worker start-up stay out of the figures.

    ``extra``: fields beyond the contract the events carry (the demo's app release starts here).
    """
    topic = settings.kafka.clicks_topic
    before = committed_total(job, topic)
    report = produce_at_rate(settings.kafka.bootstrap, topic, events, 1.0, extra=extra)
    target = before + report.sent  # what was really sent (pacing may send one fewer)
    deadline = time.monotonic() + timeout
    while committed_total(job, topic) < target and time.monotonic() < deadline:
        time.sleep(0.2)
    return report


#: seconds at the full rate before the measured run
WARM_UP_S = 20.0


def _produce(s: Settings, rate: float, seconds: float, keys: str = "") -> int:
    """Events a rate producer process sent (its own process: in this one it would share the driver's GIL)."""
    done = subprocess.run([sys.executable, "-m", "lab.bench.rate_producer", "--rate", str(rate), "--duration",
                           str(seconds), "--topic", s.kafka.clicks_topic, "--keys", keys],
                          capture_output=True, text=True, check=True)
    return int(done.stdout.split()[1])


def run(settings: Settings, rate: float, duration: float, out_dir: Path, progress=print,
        keep: bool = False, keys: str = "", profile: bool = False) -> IngestBenchResult:
    """The run on a topic and tables of its own, removed at the end unless ``keep`` (``lab.bench.scratch``);
    ``keys``: the events' key space (``loadgen.key_space``), e.g. the members and products `lakehouse load dims`
    loaded into the source database; ``profile``: where a batch's time went (the job's own phase metrics), the
    pipeline's CPU split by process."""
    tag = time.strftime("%Y%m%d%H%M%S")
    s = bench_settings(settings, tag)
    partitions = s.kafka.clicks_partitions
    admin = admin_client(s)
    admin.create_topics([NewTopic(s.kafka.clicks_topic, partitions, 1)])[s.kafka.clicks_topic].result()
    spark = build_session(s, "lakehouse-bench-ingest")
    job = ClickIngestJob(spark, s)
    stop = threading.Event()
    loop = threading.Thread(target=run_loop, args=(job, s.pipeline.trigger_seconds, stop), daemon=True)
    loop.start()
    warm = warm_up(job, s)
    # Not counted: the first half-minute at full rate compiles the hot path (JIT) and ran at p95 7.4 s
    # where the minutes after held 1.7-2.3 s (docs/performance.md, "Third round").
    progress(f"warming up at {rate:,.0f} events/s for {WARM_UP_S:.0f}s (not counted)")
    warm.sent += _produce(s, rate, WARM_UP_S, keys)
    deadline = time.monotonic() + 120
    while committed_total(job, s.kafka.clicks_topic) < warm.sent and time.monotonic() < deadline:
        time.sleep(0.2)
    progress(f"warm; producing {rate:,.0f} events/s for {duration:.0f}s into {s.kafka.clicks_topic}")
    since_ms = int(time.time() * 1000)
    phases_before = batch_phases()
    meter = _cpu_meter(spark, s, by_process=profile)
    meter.start()
    memory = _memory_meter(spark)
    began = time.monotonic()
    producer = subprocess.Popen(
        [sys.executable, "-m", "lab.bench.rate_producer", "--rate", str(rate), "--duration", str(duration),
         "--topic", s.kafka.clicks_topic, "--keys", keys], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    samples = []  # (seconds since start, events committed) while the producer runs
    while producer.poll() is None:
        samples.append((time.monotonic() - began, committed_total(job, s.kafka.clicks_topic)))
        time.sleep(0.5)
    samples.append((time.monotonic() - began, committed_total(job, s.kafka.clicks_topic)))
    stdout, stderr = producer.communicate()
    progress(stdout.strip() or stderr.strip())
    in_run = int(stdout.split()[1]) if stdout.startswith("produced") else 0
    produced = warm.sent + in_run
    committed = 0
    deadline = time.monotonic() + max(120.0, duration)
    while time.monotonic() < deadline:
        committed = sum(job.committed.get(s.kafka.clicks_topic, {}).values())
        if committed >= produced:
            break
        time.sleep(0.5)
    finished = time.monotonic()
    cpu = meter.stop()
    peak_rss = memory.stop()
    cpu["load generator"] = _producer_cpu(stdout)
    stop.set()
    loop.join(120)
    job.close()
    progress(f"pipeline committed {committed:,} of {produced:,}; measuring freshness and the raw ceiling")
    fresh = clicks_freshness(spark, s.catalog.clicks_table, since_ms)
    p50, p95, p99 = fresh.p50_s, fresh.p95_s, fresh.p99_s
    count = REGISTRY.get_sample_value("lakehouse_pipeline_batch_duration_seconds_count", {"pipeline": "clicks"}) or 0
    total = REGISTRY.get_sample_value("lakehouse_pipeline_batch_duration_seconds_sum", {"pipeline": "clicks"}) or 0
    mean = total / count if count else float("nan")
    found = batch_phases(phases_before, s.catalog.clicks_table) if profile else None
    spark.stop()
    ceiling = raw_ceiling(s, s.kafka.clicks_topic, partitions, out_dir)
    if not keep:
        discard(s, [s.catalog.clicks_table, s.catalog.dead_letter_table], [s.kafka.clicks_topic])
    per_million = {part: seconds / in_run * 1e6 for part, seconds in cpu.items()} if in_run else {}
    return IngestBenchResult(rate, duration, produced, committed, commit_rate(samples), p50, p95, p99,
                             int(count), mean, ceiling, finished - began - samples[-1][0], in_run / duration,
                             per_million, peak_rss, found)


def _sum_and_count(family: str, label: str, value: str) -> tuple[float, float]:
    """A histogram's sum and count for one label value, from this process's registry."""
    found = {sample.name.removeprefix(family): sample.value for metric in REGISTRY.collect() if metric.name == family
             for sample in metric.samples if sample.labels.get(label) == value}
    return found.get("_sum", 0.0), found.get("_count", 0.0)


def batch_phases(before: dict[str, tuple[float, float]] | None = None, clicks_table: str = "") -> dict:
    """Where the click job's batches spent their time, from its own metrics: without ``before``, the running
    (sum, count) of each part; with it, the mean seconds a batch of each part since then.

    Parts: ``plan`` and ``write`` (the tasks' work and the commit) of a batch, the ``commit`` alone, and
    the standing tasks' ``fetch``, ``transform`` and ``write``, summed over the tasks of a batch.
    """
    now = {phase: _sum_and_count("lakehouse_pipeline_batch_phase_seconds", "phase", phase)
           for phase in ("plan", "write")}
    if clicks_table or before is None:
        now["commit"] = _sum_and_count("lakehouse_pipeline_commit_duration_seconds", "table", clicks_table)
    batches = now["write"][1]
    for sample in (sample for metric in REGISTRY.collect() if metric.name == "lakehouse_pipeline_task_phase_seconds"
                   for sample in metric.samples
                   if sample.name.endswith("_total") and sample.labels.get("pipeline") == "clicks"):
        now[f"tasks: {sample.labels['phase']}"] = (sample.value, batches)
    if before is None:
        return now
    means = {}
    for part, (total, count) in now.items():
        was_total, was_count = before.get(part, (0.0, 0.0))
        if count > was_count:
            means[part] = (total - was_total) / (count - was_count)
    return means


def _memory_meter(spark) -> PeakRss:
    """Peak memory by part: this process (the driver), its Spark JVM, and the JVM's Python workers together."""
    jvm = getattr(spark.sparkContext._gateway, "proc", None)
    return PeakRss(lambda: {"driver (Python)": os.getpid(),
                            **({"JVM (driver and executor)": jvm.pid, "Python workers": python_workers(jvm.pid)}
                               if jvm is not None else {})})


def _cpu_meter(spark, s: Settings, by_process: bool = False) -> CpuMeter:
    """The run's CPU by part: this process (the driver) with its Spark JVM and Python workers, and each service;
    ``by_process``: the pipeline's three kinds of process apart too."""
    jvm = getattr(spark.sparkContext._gateway, "proc", None)  # None when PySpark joined a running JVM
    apart = {
        "pipeline: driver (Python)": process_cpu_seconds,
        "pipeline: JVM (driver and executor)": lambda: process_cpu_seconds(jvm.pid),
        "pipeline: Python workers": lambda: tree_cpu_seconds(jvm.pid) - process_cpu_seconds(jvm.pid),
    } if by_process and jvm is not None else {}
    return CpuMeter({
        **apart,
        "pipeline (driver, JVM, Python workers)":
            lambda: process_cpu_seconds() + (tree_cpu_seconds(jvm.pid) if jvm is not None else 0.0),
        "broker": service_cpu(s.kafka.port),
        "object store": service_cpu(s.s3.port),
        "metastore": service_cpu(s.metastore.port),
        "source database (lookups of large dimensions)": service_cpu(s.mariadb.port),
    })


def _producer_cpu(stdout: str) -> float:
    """The CPU seconds the rate producer reported for itself (``... cpu 1.23s``), 0 if it did not."""
    words = stdout.split()
    return float(words[words.index("cpu") + 1].rstrip("s")) if "cpu" in words else 0.0


def commit_rate(samples: list[tuple[float, int]], settle_s: float = 10.0) -> float:
    """Events committed per second while the load ran, after the first ``settle_s`` (or quarter).

    In the steady state the commits trail the produced events by the freshness, so the slope
    of the committed count equals the produced rate when the pipeline keeps up and falls
    below it when it lags more and more. (Committed events over the time until the last one
    landed would count the final batch's freshness as slowness: 98 % at 180 s for a pipeline
    that keeps up.)
    """
    end_t, end_n = samples[-1]
    start = min(settle_s, end_t / 4)
    start_t, start_n = next((t, n) for t, n in samples if t >= start)
    return (end_n - start_n) / (end_t - start_t) if end_t > start_t else 0.0


def save(result: IngestBenchResult, out_dir: Path) -> Path:
    path = out_dir / "bench-ingest.json"
    path.write_text(json.dumps({**asdict(result), "ratio_to_raw": result.ratio}, indent=2))
    return path
