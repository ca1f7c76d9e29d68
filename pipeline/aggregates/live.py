"""`lakehouse run aggregate`: live aggregates from a streaming read of the click table.

Spark Structured Streaming reads the Iceberg click table incrementally (each new
append snapshot is a micro-batch) and every batch is merged into the result tables
(``pipeline.aggregates.rollups``). Spark's checkpoint replays an unfinished batch after
a crash; the batch id in the result tables' commits makes the replay a no-op.

Maintenance of the click table is handled deliberately:
- compaction writes ``replace`` snapshots, which the Iceberg source skips (no new rows);
- ``delete``/``overwrite`` snapshots (row-level fixes) are skipped by option, logged;
- if snapshot expiry removed the snapshot the query stands on, the query cannot go on.
  ``pipeline.aggregate_on_snapshot_expired = rebuild`` (default) drops the checkpoint,
  starts a new epoch and recomputes the aggregates from the whole table; ``fail`` stops.
"""

from __future__ import annotations

import functools
import json
import logging
import shutil
import threading
import time
import uuid

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from lakehouse.settings import Settings
from pipeline import metrics
from pipeline.aggregates import rollups as ru
from pipeline.commit_locks import StaleLockReaper
from pipeline.parallel import in_parallel
from pipeline.tables import ensure_aggregate_tables, ensure_clicks_tables

log = logging.getLogger(__name__)

EPOCH_FILE = "lakehouse-epoch.json"
#: how the Iceberg source reports that its position was expired
EXPIRED_MARKERS = ("expired", "Cannot find snapshot", "Cannot load current offset")


class SnapshotExpiredError(RuntimeError):
    """The streaming position no longer exists in the click table."""


def _stop_between_batches(query, timeout: float = 60.0) -> None:
    """Stop after the batch in flight (stopping inside foreachBatch interrupts its commit)."""
    deadline = time.monotonic() + timeout
    while query.isActive and query.status.get("isTriggerActive") and time.monotonic() < deadline:
        time.sleep(0.1)
    query.stop()


class LiveAggregates:
    name = "aggregate"

    def __init__(self, spark, settings: Settings, from_timestamp_ms: int | None = None):
        self.spark, self.settings = spark, settings
        self.source = settings.catalog.clicks_table
        self.rollups = ru.rollups(settings)
        self.tables = [r.table for r in self.rollups]
        self.checkpoint = settings.checkpoint_path("aggregate")
        self.from_timestamp_ms = from_timestamp_ms
        ensure_clicks_tables(spark, settings)
        ensure_aggregate_tables(spark, settings)
        self.rebuilds = 0
        self._done: dict[str, tuple[str, int]] = {}  # progress this process committed, per result table

    # -- epoch: one per checkpoint. A new epoch backfills the results from one snapshot of
    # -- the click table and streams what is committed after it.
    def _epoch_state(self) -> dict:
        path = self.checkpoint / EPOCH_FILE
        if path.exists():
            return json.loads(path.read_text())
        state = {"epoch": uuid.uuid4().hex, "backfill_snapshot": None, "stream_from_ms": self.from_timestamp_ms}
        if self.from_timestamp_ms is None:
            current = self.spark.sql(
                f"SELECT snapshot_id, unix_millis(committed_at) AS ms FROM {self.source}.snapshots "
                f"ORDER BY committed_at DESC LIMIT 1"
            ).collect()
            if current:
                state["backfill_snapshot"] = current[0].snapshot_id
                state["stream_from_ms"] = current[0].ms + 1
        self.checkpoint.mkdir(parents=True, exist_ok=True)
        self._save_state(state)
        return state

    def _save_state(self, state: dict) -> None:
        (self.checkpoint / EPOCH_FILE).write_text(json.dumps(state))

    def _anchor_missing(self, state: dict) -> int | None:
        """The snapshot this epoch stands on, if expiry removed it (then newer appends may be gone too).

        Age-based expiry keeps every snapshot younger than one it keeps, so while the
        anchor exists nothing after it is lost.
        """
        anchor = state.get("position_snapshot") or state.get("backfill_snapshot")
        if anchor is None:
            return None
        found = self.spark.sql(f"SELECT 1 FROM {self.source}.snapshots WHERE snapshot_id = {int(anchor)}").collect()
        return None if found else int(anchor)

    def _track_position(self, query, state: dict) -> None:
        """Remember the source snapshot of the last finished batch (Spark reports it after the sink commit)."""
        progress = query.lastProgress
        if not progress or not progress.get("sources"):
            return
        end = progress["sources"][0].get("endOffset")
        snapshot = json.loads(end).get("snapshot_id") if isinstance(end, str) else (end or {}).get("snapshot_id")
        if snapshot and snapshot != state.get("position_snapshot"):
            state["position_snapshot"] = snapshot
            self._save_state(state)

    def _start(self):
        state = self._epoch_state()
        missing = self._anchor_missing(state)
        if missing is not None:
            self._rebuild(f"snapshot {missing}, where the aggregates stand, was expired or removed")
            state = self._epoch_state()
        self.epoch, self.state = state["epoch"], state
        self._done.clear()  # the first batch after a (re)start reads the tables' progress again
        history = None
        if state["backfill_snapshot"] is not None:
            history = (self.spark.read.option("snapshot-id", str(state["backfill_snapshot"]))
                       .table(self.source).select(*ru.SOURCE_COLUMNS))
        for rollup in self.rollups:
            ru.backfill(history, rollup, self.epoch)
        reader = (self.spark.readStream.format("iceberg")
                  .option("streaming-skip-delete-snapshots", "true")
                  .option("streaming-skip-overwrite-snapshots", "true"))
        if state["stream_from_ms"] is not None:
            reader = reader.option("stream-from-timestamp", str(state["stream_from_ms"]))
        clicks = reader.load(f"{self.settings.catalog.name}.{self.source}").select(*ru.SOURCE_COLUMNS)
        return (clicks.writeStream.queryName(f"live-aggregates-{self.epoch[:8]}")
                .option("checkpointLocation", str(self.checkpoint / "spark"))
                .trigger(processingTime=f"{self.settings.pipeline.aggregate_trigger_seconds} seconds")
                .foreachBatch(self.apply_batch)
                .start())

    def apply_batch(self, batch: DataFrame, batch_id: int) -> None:
        began = time.monotonic()
        # One pass over the new click rows, to a few partial totals; both rollups and the stats come from them.
        fine = ru.fine_totals(batch, self.rollups).persist()
        try:
            stats = fine.agg(F.coalesce(F.sum("views"), F.lit(0)).alias("n"),
                             F.max("through_ms").alias("through_ms")).first()
            summed = time.monotonic()

            def merge(rollup):
                # The first batch after a (re)start reads the table's progress; later ones know it.
                known = self._done.get(rollup.table)
                merged = ru.merge_batch(fine, rollup, self.epoch, batch_id, known, stats.through_ms)
                self._done[rollup.table] = (self.epoch, max(batch_id, known[1] if known else -1))
                return merged

            merged = in_parallel(fine.sparkSession, [functools.partial(merge, r) for r in self.rollups])
        finally:
            fine.unpersist()
        now = time.time()
        for rollup in self.rollups:
            metrics.LAST_COMMIT.labels(rollup.table).set(now)
        metrics.ROWS.labels(self.name, "in").inc(stats.n if any(merged) else 0)
        metrics.BATCHES.labels(self.name, "committed" if any(merged) else "replayed").inc()
        metrics.BATCH_SECONDS.labels(self.name).observe(time.monotonic() - began)
        if stats.through_ms is not None:
            metrics.AGGREGATE_DELAY.set(now - stats.through_ms / 1000)
        log.info("aggregate: batch %d, %d click rows merged in %.2fs (read and summed in %.2fs)", batch_id, stats.n,
                 time.monotonic() - began, summed - began)

    def _rebuild(self, reason: str) -> None:
        if self.settings.pipeline.aggregate_on_snapshot_expired == "fail":
            raise SnapshotExpiredError(
                f"{reason}. The live aggregates' position in {self.source} was expired by maintenance. "
                "Set LAKEHOUSE_PIPELINE__AGGREGATE_ON_SNAPSHOT_EXPIRED=rebuild to recompute from the whole table, "
                "or keep snapshots longer than the aggregates may lag.")
        log.warning("aggregate: %s; rebuilding: backfill from the current snapshot, then stream on", reason)
        shutil.rmtree(self.checkpoint, ignore_errors=True)
        self.rebuilds += 1
        metrics.AGGREGATE_REBUILDS.inc()

    def run_until(self, stop: threading.Event, max_restarts: int = 100) -> None:
        """Run the streaming query until ``stop``; rebuild or restart it when it dies."""
        with StaleLockReaper(self.settings, self.tables):
            self._supervise(stop, max_restarts)

    def _supervise(self, stop: threading.Event, max_restarts: int) -> None:
        failures = 0
        while not stop.is_set():
            query = self._start()
            while query.isActive and not stop.is_set():
                stop.wait(0.5)
                self._track_position(query, self.state)
            if stop.is_set():
                _stop_between_batches(query)
                return
            error = query.exception()
            message = str(error.desc if hasattr(error, "desc") else error) if error else "query ended"
            if any(marker in message for marker in EXPIRED_MARKERS):
                self._rebuild(message.splitlines()[0][:300])
                continue
            failures += 1
            if failures > max_restarts:
                raise RuntimeError(f"live aggregates failed {failures} times; last error: {message[:500]}")
            delay = min(30, 2 ** min(failures, 5))
            log.error("aggregate: query failed (%s); restarting from the checkpoint in %ds", message[:300], delay)
            stop.wait(delay)

    def close(self) -> None:
        for query in self.spark.streams.active:
            query.stop()
