"""`make soak`: hours of steady load with maintenance on, and proof the tables stay fast.

A Spark application runs the click ingestion on a soak topic and tables of their own
while a producer process writes at a fixed rate, and the maintenance service keeps those
tables small from a process of its own (its own Spark application, as in Kubernetes, at a
lower CPU priority so the writer's batches come first).
Every ``every`` seconds the soak samples what makes a table slow to read: live data files
in the fullest day-partition, delete files, snapshots, manifest bytes, the wall and
CPU time of a fixed set of queries (DuckDB, as a reader outside Spark sees the table;
lab.soak.reader says why both) and the
freshness p95 of that window (produce -> commit, from the writer's latency histogram:
a scan of the table would count compacted rows as committed when compaction rewrote
them), and what the window cost: the click job's mean batch time and the seconds the
maintenance service spent per action and the CPU seconds of the writer's and the
maintenance service's processes, so a freshness change can be traced to what took the
cores. At the end every produced event must be in the table exactly once (by eventId)
and the goals are checked:

- live data files per day-partition <= 64 at every sample;
- query drift, in the reader's CPU per query (median of the samples taken under load in the
  last hour vs the first hour, as the goal reads; a run shorter than two hours has no two hours
  to compare and uses its last and first thirds) <= ``latency_drift``: the samples after the
  producer stopped read a thinning last minute, so they would measure the load ending, not the table;
- zero lost, zero duplicated events (the only goal a ``--no-maintenance`` baseline is held to).
"""

from __future__ import annotations

import math
import statistics
import subprocess
import sys
import threading
import time
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka.admin import NewTopic

from deploy.local.services.broker import admin_client
from lab.bench.ingest import bench_settings
from lab.bench.process_cpu import listening_pid, process_cpu_seconds, tree_cpu_seconds
from lab.soak.reader import cost_in_fresh_process
from lab.soak.samples import MAX_FILES_PER_PARTITION, Sample, write_samples
from lab.soak.services import MaintenanceProbe, child_env, histogram_sums, maintenance_service
from lakehouse import kafka_clients
from lakehouse.catalog import pyiceberg_catalog
from lakehouse.settings import Settings
from pipeline.app import run_jobs
from pipeline.clicks.job import ClickIngestJob
from pipeline.metrics import BATCH_PHASE_SECONDS, BATCH_SECONDS, E2E_LATENCY, window_quantile
from pipeline.spark_session import build_session

DRIFT_SPAN_S = 3600  # the longest span the drift compares: the last hour with the hour before
COMPACTION = ("compact", "merge")  # the maintenance actions that rewrite data files


@dataclass
class SoakResult:
    samples: list[Sample]
    produced: int
    rows: int
    distinct_ids: int
    dead_letters: int
    out_dir: Path
    latency_drift_limit: float
    distinct_offsets: int = 0  # distinct (partition, offset) among the rows
    failures: list[str] = field(default_factory=list)
    maintenance: bool = True  # False for the --no-maintenance baseline
    duration_s: float = 0.0  # how long the producer wrote: decides whether drift compares hours or thirds

    @property
    def duplicated_by_pipeline(self) -> int:
        """Rows committed twice from the same Kafka record: the pipeline's exactly-once broken."""
        return self.rows - self.distinct_offsets

    @property
    def duplicated_in_kafka(self) -> int:
        """Events the producer wrote to Kafka twice (same eventId, different offsets)."""
        return self.distinct_offsets - self.distinct_ids

    def freshness_summary(self) -> str:
        """First / last / worst freshness p95 over the windows that committed something (the final
        sample, taken after the producer stopped, has none)."""
        p95s = [x.freshness_p95_s for x in self.samples if not math.isnan(x.freshness_p95_s)]
        return f"{p95s[0]} / {p95s[-1]} / {max(p95s)}" if p95s else "no window committed anything"

    @property
    def drift(self) -> float:
        """The goal's drift: the reader's CPU per query, the last span of the run against the span before it."""
        return self._drift("query_cpu_ms")

    @property
    def span_s(self) -> float:
        """The span the drift compares: half the run, at most ``DRIFT_SPAN_S`` (an hour's soak: the last
        30 minutes against the 30 before)."""
        return min(DRIFT_SPAN_S, self.duration_s / 2)

    @property
    def drift_span(self) -> str:
        """The span in words, for the summary."""
        return f"the last {self.span_s / 60:.4g} min against the {self.span_s / 60:.4g} before"

    @property
    def wall_drift(self) -> float:
        """The same for wall time: reported, not judged (it moves with who else had the cores)."""
        return self._drift("query_ms")

    def _drift(self, figure: str) -> float:
        """Median of the last span's samples against the span's before it, among those with data taken under load."""
        with_data = [x for x in self.samples if x.committed > 0 and x.under_load]
        cut = self.duration_s - self.span_s
        early = [x for x in with_data if cut - self.span_s < x.elapsed_s <= cut]
        late = [x for x in with_data if x.elapsed_s > cut]
        if not early or not late:
            return 0.0
        first = statistics.median(getattr(x, figure) for x in early)
        last = statistics.median(getattr(x, figure) for x in late)
        return (last - first) / first if first else 0.0


def _shape(spark, table: str) -> tuple[int, int, int, int, int, int]:
    row = spark.sql(
        f"SELECT (SELECT coalesce(max(n), 0) FROM (SELECT count(*) AS n FROM {table}.data_files GROUP BY partition)) "
        f"AS worst, (SELECT count(*) FROM {table}.data_files) AS files, "
        f"(SELECT count(*) FROM {table}.delete_files) AS deletes, (SELECT count(*) FROM {table}.snapshots) AS snaps, "
        f"(SELECT count(*) FROM {table}.snapshots WHERE operation = 'append') AS appends, "
        f"(SELECT coalesce(sum(length), 0) FROM {table}.manifests) AS manifest_bytes").first()
    return row.worst, row.files, row.deletes, row.snaps, row.appends, row.manifest_bytes


def _metadata_bytes(catalog, table: str) -> int:
    """Size of the table's current metadata file, as a new reader finds it."""
    loaded = catalog.load_table(table)
    return len(loaded.io.new_input(loaded.metadata_location))


def _window_activity(before: dict, after: dict, batches_before: dict, batches_after: dict) -> dict[str, float]:
    """What the writer and the maintenance service spent in one window: to see which one took the cores."""
    def spent(totals_before, totals_after, key):
        return totals_after.get(key, (0.0, 0.0))[0] - totals_before.get(key, (0.0, 0.0))[0]

    def mean(key):  # per batch in the window, of the batch time ("clicks") or one of its phases
        b0, b1 = batches_before.get(key, (0.0, 0.0)), batches_after.get(key, (0.0, 0.0))
        return round((b1[0] - b0[0]) / (b1[1] - b0[1]), 2) if b1[1] > b0[1] else 0.0

    other = sum(spent(before, after, k) for k in after if k not in (*COMPACTION, "expire"))
    return {"batch_s_mean": mean("clicks"), **{f"{phase}_s_mean": mean(phase) for phase in ("plan", "write", "dead_letters")},
            "compact_s": round(sum(spent(before, after, k) for k in COMPACTION), 1),
            "expire_s": round(spent(before, after, "expire"), 1), "other_maintenance_s": round(other, 1)}


def run_soak(settings: Settings, rate: float, duration: float, every: float, out_dir: Path,
             latency_drift: float = 0.10, progress=print, maintenance: bool = True, spark=None) -> SoakResult:
    """Run the soak; ``spark``: an existing session to use (and leave running), else one of its own."""


    s = bench_settings(settings, time.strftime("%Y%m%d%H%M%S"), "soak")
    out_dir.mkdir(parents=True, exist_ok=True)
    admin = admin_client(s)
    admin.create_topics([NewTopic(s.kafka.clicks_topic, s.kafka.clicks_partitions, 1)])[s.kafka.clicks_topic].result()
    own_session = spark is None
    spark = spark or build_session(s, "lakehouse-soak")
    ClickIngestJob(spark, s).close()  # creates the tables before the first sample
    table = f"{s.catalog.name}.{s.catalog.clicks_table}"
    stop, services = threading.Event(), ExitStack()
    probe = (services.enter_context(maintenance_service(s, out_dir / "maintenance.log"))
             if maintenance else MaintenanceProbe())
    try:
        if maintenance:
            progress(f"maintenance: up after {probe.wait_for_first_pass():.0f} s (its first pass, before the load)")
    except BaseException:
        services.close()
        raise
    writer_jvm = getattr(spark.sparkContext._gateway, "proc", None)  # None when PySpark joined a running JVM
    broker_pid = listening_pid(s.kafka.port)

    def cpu_so_far() -> tuple[float, float, float]:
        """CPU seconds so far of the writer (this process and its Spark JVM), maintenance, the broker."""
        writer = process_cpu_seconds() + (tree_cpu_seconds(writer_jvm.pid) if writer_jvm else 0.0)
        return writer, probe.cpu_so_far(), tree_cpu_seconds(broker_pid) if broker_pid else 0.0

    def batch_times() -> dict[str, tuple[float, float]]:
        """(sum, count) so far of the click batches ("clicks") and of each of their phases."""
        return {**histogram_sums(BATCH_SECONDS.collect()), **histogram_sums(BATCH_PHASE_SECONDS.collect())}

    jobs = threading.Thread(target=run_jobs, args=(spark, s, ["clicks"], stop), daemon=True)
    jobs.start()
    producer = subprocess.Popen(
        [sys.executable, "-m", "lab.bench.rate_producer", "--rate", str(rate), "--duration", str(duration),
         "--bad-share", "0.01", "--topic", s.kafka.clicks_topic],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=child_env(s))
    samples: list[Sample] = []
    catalog = pyiceberg_catalog(s)
    began = time.monotonic()
    seen = E2E_LATENCY.counts(s.catalog.clicks_table)
    maintenance_seen, batches_seen = probe.seconds_so_far(), batch_times()
    cpu_seen = cpu_so_far()
    progress(f"soak: {rate:,.0f} events/s for {duration:.0f} s into {s.kafka.clicks_topic}, sample every {every:.0f} s; "
             + (f"maintenance at nice {s.maintenance.nice}, log {out_dir / 'maintenance.log'}" if maintenance
                else "no maintenance"))
    try:
        while True:
            finished = producer.poll() is not None
            time.sleep(0 if finished else min(every, max(0.0, duration - (time.monotonic() - began))) or every)
            under_load = producer.poll() is None
            worst, files, deletes, snaps, appends, manifest_bytes = _shape(spark, table)
            committed = spark.table(table).count()
            now = E2E_LATENCY.counts(s.catalog.clicks_table)
            maintenance_now, batches_now = probe.seconds_so_far(), batch_times()
            cpu_now = cpu_so_far()
            cost = cost_in_fresh_process(child_env(s))
            metadata_bytes = _metadata_bytes(catalog, s.catalog.clicks_table)
            sample = Sample(round(time.monotonic() - began, 1), committed, worst, files, deletes, snaps,
                            manifest_bytes, cost.wall_ms,
                            round(window_quantile(E2E_LATENCY.buckets, seen, now, 0.95), 2),
                            **_window_activity(maintenance_seen, maintenance_now, batches_seen, batches_now),
                            under_load=under_load, query_cpu_ms=cost.cpu_ms,
                            writer_cpu_s=round(max(0.0, cpu_now[0] - cpu_seen[0]), 1),
                            maintenance_cpu_s=round(max(0.0, cpu_now[1] - cpu_seen[1]), 1),
                            broker_cpu_s=round(max(0.0, cpu_now[2] - cpu_seen[2]), 1), metadata_bytes=metadata_bytes,
                            appends=appends)
            seen, maintenance_seen, batches_seen, cpu_seen = now, maintenance_now, batches_now, cpu_now
            samples.append(sample)
            progress(f"  t={sample.elapsed_s:>6.0f}s rows={committed:>9,} files/partition={worst:>3} "
                     f"deletes={deletes} snapshots={snaps:>3} ({appends} batch appends) "
                     f"metadata={metadata_bytes / 1024:,.0f} KiB "
                     f"manifests={manifest_bytes / 1024:,.0f} KiB "
                     f"queries={sample.query_ms:,.0f} ms ({sample.query_cpu_ms:,.0f} ms CPU) "
                     f"freshness p95={sample.freshness_p95_s} s "
                     f"batch={sample.batch_s_mean} s (plan {sample.plan_s_mean}, write {sample.write_s_mean}, "
                     f"dead letters {sample.dead_letters_s_mean}) maintenance: compact={sample.compact_s} s "
                     f"expire={sample.expire_s} s other={sample.other_maintenance_s} s; "
                     f"CPU writer={sample.writer_cpu_s} s maintenance={sample.maintenance_cpu_s} s "
                     f"broker={sample.broker_cpu_s} s")
            if finished:
                break
        progress(producer.stdout.read().strip() if producer.stdout else "")
        produced = kafka_clients.records_in_topic(s.kafka.bootstrap, s.kafka.clicks_topic)
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and _committed_total(spark, s) < produced:
            time.sleep(2)
    finally:
        stop.set()
        jobs.join(300)
        services.close()
    rows, distinct, offsets = spark.sql(f"SELECT count(*), count(DISTINCT event_id), "
                                        f"count(DISTINCT kafka_partition, kafka_offset) FROM {table}").first()
    dead = spark.table(s.catalog.dead_letter_table).count()
    if own_session:
        spark.stop()
    result = SoakResult(samples, produced, rows, distinct, dead, out_dir, latency_drift, offsets,
                        maintenance=maintenance, duration_s=duration)
    result.failures = _goals(result)
    _write(result)
    return result


def _committed_total(spark, s: Settings) -> int:
    return (spark.table(s.catalog.clicks_table).count() + spark.table(s.catalog.dead_letter_table).count())


def _goals(r: SoakResult) -> list[str]:
    """What the run missed. The baseline (no maintenance) is held to exactly-once only: its files and
    drift are what maintenance is there to prevent, reported beside the run with maintenance, not judged."""
    failures = []
    worst = max(x.data_files_max_partition for x in r.samples)
    if r.maintenance and worst > MAX_FILES_PER_PARTITION:
        failures.append(f"live data files per day-partition reached {worst} (goal <= {MAX_FILES_PER_PARTITION})")
    if r.maintenance and len(r.samples) >= 2 and r.drift > r.latency_drift_limit:
        failures.append(f"the reader's CPU per query drifted {r.drift:+.0%} ({r.drift_span}, the samples "
                        f"under load; goal <= {r.latency_drift_limit:.0%}; wall time {r.wall_drift:+.0%})")
    if r.rows + r.dead_letters != r.produced:
        failures.append(f"{r.produced:,} produced but {r.rows:,} rows + {r.dead_letters:,} dead letters committed")
    if r.rows != r.distinct_ids:
        failures.append(f"{r.rows - r.distinct_ids:,} duplicated events: {r.duplicated_by_pipeline:,} committed twice "
                        f"from one Kafka record (pipeline), {r.duplicated_in_kafka:,} written to Kafka twice "
                        f"(producer retries)")
    return failures


def _write(r: SoakResult) -> None:
    from lab.soak.plot import plot_soak  # deferred: matplotlib (~0.5 s), only once there is something to draw

    write_samples(r.samples, r.out_dir / "soak.csv")
    plot_soak(r.samples, r.maintenance, r.out_dir / "soak.png")
