"""Prometheus metrics of the Spark jobs, served from the driver.

Names start with ``lakehouse_`` and carry their unit. End-to-end latency is a real
Prometheus histogram whose bucket counts are computed by Spark on the executors (one
small aggregate per batch) and added here, so no row-level data ever reaches the driver.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from socketserver import ThreadingMixIn
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import REGISTRY, Counter, Gauge, Histogram, make_wsgi_app
from prometheus_client.core import HistogramMetricFamily
from prometheus_client.registry import Collector

from lakehouse.errors import LakehouseError

#: 100 ms to 10 min, dense around the seconds-level freshness goal
LATENCY_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.5, 10.0, 15.0, 20.0, 30.0, 60.0, 120.0, 300.0, 600.0)

ROWS = Counter("lakehouse_pipeline_rows_total", "Rows seen by a job, by stage (in, valid, dead_letter).",
               ["pipeline", "stage"])
BATCHES = Counter("lakehouse_pipeline_batches_total", "Micro-batches run, by outcome (committed, idle, failed).",
                  ["pipeline", "outcome"])
BATCH_SECONDS = Histogram("lakehouse_pipeline_batch_duration_seconds", "Wall time of a micro-batch.", ["pipeline"],
                          buckets=(0.25, 0.5, 1, 2, 3, 5, 10, 20, 30, 60, 120))
TASK_PHASE_SECONDS = Counter(
    "lakehouse_pipeline_task_phase_seconds", "Seconds the click job's standing tasks spent on each phase of the "
    "batches, summed over its tasks: fetch (Kafka records into Arrow), transform (validate and enrich), write "
    "(the rows as Parquet data files in the object store).",
    ["pipeline", "phase"])
BATCH_PHASE_SECONDS = Histogram(
    "lakehouse_pipeline_batch_phase_seconds", "Wall time of each phase of a click micro-batch: plan (offset ranges "
    "from the broker's watermarks), write (the standing tasks fetch, validate and enrich the records and write the "
    "data files; the driver commits the click table), dead_letters (only in batches that had any: commit them), "
    "merge (in the background: the job's merge of its own small files, from its start to its commit).",
    ["phase"], buckets=(0.05, 0.1, 0.25, 0.5, 1, 2, 3, 5, 10, 30))
COMMIT_SECONDS = Histogram("lakehouse_pipeline_commit_duration_seconds", "Wall time of one Iceberg commit.",
                           ["table"], buckets=(0.1, 0.25, 0.5, 1, 2, 3, 5, 10, 30))
BATCH_ROWS = Histogram("lakehouse_pipeline_batch_rows", "Records read per micro-batch.", ["pipeline"],
                       buckets=(0, 10, 100, 1_000, 5_000, 10_000, 50_000, 100_000, 500_000))
LAG = Gauge("lakehouse_kafka_lag_records", "Records in Kafka not yet committed (end - committed).",
            ["pipeline", "topic", "partition"])
COMMITTED_OFFSET = Gauge("lakehouse_kafka_committed_offset", "Next offset to read, as committed in Iceberg.",
                         ["pipeline", "topic", "partition"])
LAST_COMMIT = Gauge("lakehouse_table_last_commit_timestamp_seconds", "Unix time of the last commit by this writer.",
                    ["table"])
CDC_APPLIED = Counter("lakehouse_cdc_rows_applied_total", "Changes (upserts, deletes) in committed MERGEs, counted "
                      "before a batch's changes of one key collapse into its last.", ["table", "action"])
DIMENSION_APPLY_LAG = Gauge("lakehouse_cdc_apply_lag_seconds",
                            "Commit time minus the oldest source timestamp in the last applied batch.", ["table"])
CDC_STAGE_SECONDS = Histogram("lakehouse_cdc_stage_seconds",
                              "The CDC apply's Spark job per batch (read, shuffle, apply in every bucket), before "
                              "its commits.", ["stage"], buckets=(0.1, 0.25, 0.5, 1, 2, 3, 5, 10, 30))
CDC_STATE_KEYS = Gauge("lakehouse_cdc_state_keys", "The CDC apply's key state: live keys each bucket's task holds.",
                       ["table", "bucket"])
CDC_STATE_BYTES = Gauge("lakehouse_cdc_state_bytes", "The CDC apply's key state: bytes of each bucket's key index.",
                        ["table", "bucket"])
CDC_STATE_EXECUTOR_BYTES = Gauge("lakehouse_cdc_state_executor_bytes",
                                 "The CDC apply's key state: key index bytes each executor holds (its state "
                                 "partitions, located by Spark's block managers).", ["executor"])
AGGREGATE_DELAY = Gauge("lakehouse_aggregate_delay_seconds",
                        "Live aggregates: result commit time minus the newest source commit (ingest_time) merged.")
AGGREGATE_STATE_ROWS = Gauge("lakehouse_aggregate_state_rows",
                             "Live aggregates: rows each result table holds after its last commit (the job's state).",
                             ["table"])
AGGREGATE_REBUILDS = Counter("lakehouse_aggregate_rebuilds_total",
                             "Times the live aggregates were recomputed because their position was expired.")
STALE_LOCKS_RELEASED = Counter("lakehouse_metastore_stale_locks_released_total",
                               "Table locks freed because their writer stopped heartbeating (it died).", ["table"])
MAINTENANCE_RUNS = Counter("lakehouse_maintenance_runs_total", "Maintenance actions run, by outcome (done, "
                           "conflict, failed).", ["table", "action", "outcome"])
MAINTENANCE_SECONDS = Histogram("lakehouse_maintenance_duration_seconds", "Wall time of one maintenance action.",
                                ["action"], buckets=(0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600))
FILES_MERGED = Counter("lakehouse_pipeline_files_merged_total", "Data files a writer replaced by merging its own "
                       "small files, by the level merged (0: its batches' files; 1: its first merges').",
                       ["pipeline", "level"])
MAINTENANCE_FILES = Counter("lakehouse_maintenance_files_rewritten_total", "Files replaced by compaction or "
                            "delete/manifest rewrites (input side).", ["table", "action"])
MAINTENANCE_BYTES = Counter("lakehouse_maintenance_bytes_rewritten_total", "Bytes read by compaction.", ["table"])
MAINTENANCE_EXPIRED = Counter("lakehouse_maintenance_snapshots_expired_total", "Snapshots expired.", ["table"])
MAINTENANCE_ORPHANS = Counter("lakehouse_maintenance_orphan_files_removed_total", "Unreferenced files removed.",
                              ["table"])
SCHEMA_CHANGES = Counter("lakehouse_schema_changes_total", "Columns added to or widened in a table by schema "
                         "evolution (pipeline.schema_policy=evolve), by change (added, widened).", ["table", "change"])
OFFSETS_EXPIRED = Counter("lakehouse_kafka_offsets_expired_total",
                          "Times committed offsets were outside the broker's retained range.", ["topic", "partition"])


class LatencyHistogram(Collector):
    """Histogram fed with pre-aggregated bucket counts (per table)."""

    def __init__(self, name: str, documentation: str, buckets: Iterable[float] = LATENCY_BUCKETS):
        self.name, self.documentation = name, documentation
        self.buckets = tuple(buckets)
        self._lock = threading.Lock()
        self._counts: dict[str, list[int]] = {}
        self._sums: dict[str, float] = {}

    def add(self, table: str, bucket_counts: list[int], total_seconds: float) -> None:
        """Add non-cumulative counts: one per bucket bound, then one for +Inf."""
        if len(bucket_counts) != len(self.buckets) + 1:
            raise ValueError("need one count per bucket plus +Inf")
        with self._lock:
            current = self._counts.setdefault(table, [0] * (len(self.buckets) + 1))
            for i, n in enumerate(bucket_counts):
                current[i] += int(n)
            self._sums[table] = self._sums.get(table, 0.0) + float(total_seconds)

    def counts(self, table: str) -> list[int]:
        """Non-cumulative counts so far (one per bucket, then +Inf): diff two to get a window."""
        with self._lock:
            return list(self._counts.get(table, [0] * (len(self.buckets) + 1)))

    def collect(self):
        family = HistogramMetricFamily(self.name, self.documentation, labels=["table"])
        with self._lock:
            for table, counts in self._counts.items():
                cumulative, running = [], 0
                for bound, n in zip([*map(str, self.buckets), "+Inf"], counts):
                    running += n
                    cumulative.append((bound, running))
                family.add_metric([table], cumulative, self._sums[table])
        yield family


E2E_LATENCY = LatencyHistogram("lakehouse_e2e_latency_seconds",
                               "Event produce time (Kafka timestamp) to row committed in Iceberg.")
REGISTRY.register(E2E_LATENCY)

_server_lock = threading.Lock()
_served: set[int] = set()


# --- the binlog capture (pipeline/capture/connector.py, pipeline/capture/ddl.py) ---
CDC_EVENTS = Counter("lakehouse_cdc_events_total", "Change events published, by table and op.", ["table", "op"])
CDC_SOURCE_LAG = Gauge("lakehouse_cdc_source_lag_seconds", "Now minus the source timestamp of the last change read.")
CDC_POSITION = Gauge("lakehouse_cdc_binlog_position_bytes", "Binlog position of the last checkpoint.", ["file"])
CDC_CHECKPOINTS = Counter("lakehouse_cdc_checkpoints_total", "Source positions made durable.")
CDC_SCHEMA_CHANGES = Counter("lakehouse_cdc_schema_changes_total",
                             "Schema changes of captured tables, by table and what the lake does with them.",
                             ["table", "follow"])

# --- the freshness probe (queries/freshness_probe.py): what a reader of each table sees ---
TABLE_COMMIT_AGE = Gauge("lakehouse_table_commit_age_seconds", "Now minus the commit time of the current snapshot.",
                         ["table"])
TABLE_SNAPSHOTS = Gauge("lakehouse_table_snapshots", "Snapshots in the table metadata.", ["table"])
TABLE_DATA_FILES = Gauge("lakehouse_table_data_files", "Live data files in the current snapshot.", ["table"])
TABLE_DELETE_FILES = Gauge("lakehouse_table_delete_files", "Live delete files (position + equality).", ["table"])
TABLE_RECORDS = Gauge("lakehouse_table_records", "Records in the current snapshot (before deletes).", ["table"])
TABLE_MAX_EVENT_TIME = Gauge("lakehouse_table_max_event_timestamp_seconds",
                             "Newest event_time in the data files the current snapshot added (Unix seconds).", ["table"])
PROBE_ERRORS = Counter("lakehouse_probe_errors_total", "Probe rounds that could not read a table.", ["table"])


def window_quantile(buckets: tuple[float, ...], before: list[int], after: list[int], q: float) -> float:
    """The q-quantile of what a histogram counted between two ``counts()`` reads.

    Interpolated linearly inside the bucket, as Prometheus' histogram_quantile does; nan
    when nothing was counted.
    """
    delta = [a - b for a, b in zip(after, before, strict=True)]
    total = sum(delta)
    if total == 0:
        return float("nan")
    rank, running, lower = q * total, 0, 0.0
    for bound, n in zip(buckets, delta):
        if n and running + n >= rank:
            return lower + (bound - lower) * (rank - running) / n
        running, lower = running + n, bound
    return buckets[-1]  # in +Inf: report the largest finite bound


#: component -> whether it works right now (its last batch succeeded; the capture follows the binlog)
_ready: dict[str, bool] = {}


def set_ready(component: str, ready: bool) -> None:
    """What ``/ready`` reports: a process is ready while every component it runs works."""
    _ready[component] = ready


def readiness() -> tuple[bool, str]:
    """(ready, why): not before a component reported, nor while one of them fails."""
    failing = sorted(name for name, ok in _ready.items() if not ok)
    if not _ready:
        return False, "starting: no batch has run yet"
    return (not failing, "ready" if not failing else "failing: " + ", ".join(failing))


class _Server(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format, *args) -> None:  # noqa: A002 - the base class's signature
        """Scrapes and probes every few seconds: not worth a line each on stderr."""


def _app(metrics_app):
    def app(environ, start_response):
        if environ.get("PATH_INFO") == "/ready":
            ok, why = readiness()
            start_response("200 OK" if ok else "503 Service Unavailable", [("Content-Type", "text/plain")])
            return [why.encode() + b"\n"]
        return metrics_app(environ, start_response)
    return app


def serve(host: str, port: int, variable: str = "LAKEHOUSE_METRICS__PIPELINE_PORT") -> None:
    """Expose /metrics and /ready once per process (jobs sharing a driver share the endpoint).

    ``variable``: the setting that chooses ``port``, named in the error when the port is taken.

    ``/ready`` answers 200 only once each component of the process has worked and while none
    fails (``set_ready``): an orchestrator's readiness probe then means "it works", not "it started".
    """
    with _server_lock:
        if port in _served:
            return
        try:
            server = make_server(host, port, _app(make_wsgi_app(REGISTRY)), _Server, handler_class=_QuietHandler)
        except OSError as exc:
            raise LakehouseError(
                f"cannot serve metrics on {host}:{port} ({exc.strerror}); another job may hold it: "
                f"set {variable} to a free port"
            ) from exc
        threading.Thread(target=server.serve_forever, name=f"metrics-{port}", daemon=True).start()
        _served.add(port)
