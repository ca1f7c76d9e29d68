"""`lakehouse run aggregate`: live aggregates that follow the click table's appends, on Spark.

Each micro-batch:

1. plans on the driver, from the click table's metadata, which snapshots came after the
   position the result tables recorded (``pipeline.aggregates.increments``: the appends;
   compaction's replaces add no rows, a row-changing delete or overwrite is reported);
2. reads the rows those appends added with Iceberg's incremental scan
   (``start-snapshot-id`` exclusive to ``end-snapshot-id``) and aggregates them per rollup
   key in Spark tasks (``pipeline.aggregates.rollups``);
3. merges them with each result table's rows in Spark and overwrites the small table in one
   Iceberg commit whose summary records the newest click snapshot included.

In one application with the click ingestion (`lakehouse run pipeline`), a batch starts as soon as
the click job commits (``pipeline.table_commits``); alone, at each trigger.

That snapshot id is the job's only position: a restart reads it back from the result tables,
so a batch is counted once whatever dies when (no checkpoint beside the tables). The driver
reads manifests and commits; every click row goes through Spark tasks.

When the snapshot a result table stands on was expired by maintenance, the job rebuilds
(``pipeline.aggregate_on_snapshot_expired = rebuild``, default): totals of the whole table
at its current snapshot, written in one commit, then on from there; ``fail`` stops instead.
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from collections.abc import Callable

from pyiceberg.exceptions import NoSuchTableError
from pyspark import InheritableThread
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from lakehouse.catalog import pyiceberg_catalog
from lakehouse.errors import FatalError, LakehouseError
from lakehouse.settings import Settings
from pipeline import metrics, table_commits
from pipeline.aggregates import rollups as ru
from pipeline.aggregates.increments import (
    FROM_THE_START,
    Increment,
    PositionLostError,
    plan_increment,
    position_before,
    snapshots_after,
)
from pipeline.aggregates.tables import ensure_aggregate_tables
from pipeline.lake_writer.catalog_tables import newest_summary_with

log = logging.getLogger(__name__)

#: most click snapshots one batch reads (a job catching up commits every this many)
SNAPSHOTS_PER_BATCH = 200


class ResultTable:
    """One rollup's result table and the click snapshot its content includes (its position)."""

    def __init__(self, spark: SparkSession, catalog, rollup: ru.Rollup):
        self.spark, self.catalog, self.rollup = spark, catalog, rollup
        self.reload()

    def reload(self) -> None:
        """Read the committed position (None: nothing committed by this job yet) and the snapshot holding it."""
        table = self.catalog.load_table(self.rollup.table)
        recorded = newest_summary_with(table, ru.PROGRESS_PROPERTY).get(ru.PROGRESS_PROPERTY)
        self.position: int | None = int(recorded) if recorded is not None else None
        current = table.current_snapshot()
        self.snapshot_id: int | None = current.snapshot_id if current is not None else None
        held = current.summary.additional_properties.get("total-records") if current and current.summary else None
        if held is not None:  # the job's state: what the result table holds, from its commit's summary
            metrics.AGGREGATE_STATE_ROWS.labels(self.rollup.table).set(int(held))

    def rows(self) -> DataFrame:
        """The table's rows at the snapshot its position was read from."""
        reader = self.spark.read.format("iceberg")
        if self.snapshot_id is not None:
            reader = reader.option("versionAsOf", str(self.snapshot_id))
        return reader.load(self.rollup.table)

    def write(self, content: DataFrame, position: int, through_ms: int | None) -> None:
        """Make ``content`` the table's rows and record ``position``, in one commit."""
        began = time.monotonic()
        writer = content.writeTo(self.rollup.table).option(f"snapshot-property.{ru.PROGRESS_PROPERTY}", str(position))
        if through_ms is not None:
            writer = writer.option(f"snapshot-property.{ru.THROUGH_PROPERTY}", str(through_ms))
        writer.overwrite(F.lit(True))
        written = time.monotonic()
        self.reload()
        self.seconds = (written - began, time.monotonic() - written)
        if self.position != position:
            raise LakehouseError(f"{self.rollup.table} records position {self.position} after writing {position}: "
                                 "another writer committed in between")


class LiveAggregates:
    """The live-aggregates job: a Spark application of its own, or a FAIR pool of a shared one."""

    name = "aggregate"

    def __init__(self, spark: SparkSession, settings: Settings, from_timestamp_ms: int | None = None):
        if spark is None:
            raise FatalError("the live aggregates run on Spark: build the job with a SparkSession")
        # a session of its own (the same application): its result tables are a few hundred rows, and a shuffle
        # into one partition saves a batch the planning and tasks of the application's default partitions
        self.spark, self.settings = spark.newSession(), settings
        self.spark.conf.set("spark.sql.shuffle.partitions", "1")
        # a batch starts when the click job of this application commits (the trigger: at most this long)
        self.wake = table_commits.committed(settings.catalog.clicks_table)
        self.rollups = ru.rollups(settings)
        self.tables = [r.table for r in self.rollups]
        self.from_timestamp_ms = from_timestamp_ms
        self.catalog = pyiceberg_catalog(settings)
        # a catalog (metastore client) a result table: the tables are written and read back by threads side by
        # side, and a client opens and closes its connection around each call (two threads sharing one failed
        # a batch now and then: 'NoneType' object has no attribute 'recv')
        self._catalogs = [pyiceberg_catalog(settings) for _ in self.rollups]
        ensure_aggregate_tables(settings, self.catalog)
        self.rebuilds = 0
        self.recover()

    def recover(self) -> None:
        self.results = [ResultTable(self.spark, catalog, r) for catalog, r in zip(self._catalogs, self.rollups, strict=True)]
        self.clicks = None

    def close(self) -> None:
        """Nothing to release: every batch ends with its commits."""

    def _click_table(self):
        if self.clicks is None:
            try:
                self.clicks = self.catalog.load_table(self.settings.catalog.clicks_table)
            except NoSuchTableError:
                return None
        else:
            self.clicks.refresh()
        return self.clicks

    def run_once(self) -> int:
        """One batch: every result table catches up with the click table; returns click rows added."""
        began = time.monotonic()
        clicks = self._click_table()
        if clicks is None:
            metrics.BATCHES.labels(self.name, "idle").inc()
            return 0
        by_position: dict[int | None, list[ResultTable]] = defaultdict(list)
        for result in self.results:
            by_position[result.position].append(result)
        added = 0
        for position, results in by_position.items():
            if position is None:
                self._start(clicks, results)
                added += 1
                continue
            try:
                snapshots = snapshots_after(clicks, position, SNAPSHOTS_PER_BATCH)
            except PositionLostError as exc:
                self._rebuild(clicks, results, str(exc))
                added += 1
                continue
            if snapshots:
                planned = time.monotonic()
                increment = plan_increment(clicks, position, snapshots)
                log.info("aggregate: %d snapshots after %d: table read %.2fs, planned %.2fs", len(snapshots), position,
                         planned - began, time.monotonic() - planned)
                added += self._apply(increment, results)
        if not added:
            metrics.BATCHES.labels(self.name, "idle").inc()
            return 0
        metrics.BATCHES.labels(self.name, "committed").inc()
        metrics.BATCH_SECONDS.labels(self.name).observe(time.monotonic() - began)
        metrics.BATCH_ROWS.labels(self.name).observe(added)
        return added

    def _increment_rows(self, increment: Increment) -> DataFrame:
        """The click rows the increment's appends added, read in Spark tasks."""
        reader = self.spark.read.format("iceberg")
        if increment.start == FROM_THE_START:  # from the table's first snapshot: everything up to ``end``
            reader = reader.option("versionAsOf", str(increment.end))
        else:
            reader = reader.option("start-snapshot-id", str(increment.start)).option("end-snapshot-id",
                                                                                     str(increment.end))
        return reader.load(self.settings.catalog.clicks_table).select(*ru.SOURCE_COLUMNS)

    def _apply(self, increment: Increment, results: list[ResultTable]) -> int:
        for skipped in increment.skipped:
            log.warning("aggregate: %s changes rows of the click table in place; the totals keep them as they were "
                        "(rebuild: delete the result tables)", skipped)
        if increment.rows == 0:
            for result in results:  # only compactions: nothing to count, the position moves on in memory
                result.position = increment.end
            return 0
        began = time.monotonic()
        rows = self._increment_rows(increment)
        self._each(results, lambda result: result.write(ru.added_to(result.rows(), rows, result.rollup), increment.end,
                                                        increment.through_ms))
        self._committed(increment.rows, increment.through_ms)
        log.info("aggregate: %d click rows up to snapshot %d merged in %.2fs (%s)", increment.rows, increment.end,
                 time.monotonic() - began, ", ".join(f"{r.rollup.table.rsplit('.', 1)[-1]}: write {r.seconds[0]:.2f}s, "
                                                     f"read back {r.seconds[1]:.2f}s" for r in results))
        return increment.rows

    @staticmethod
    def _each(results: list[ResultTable], write: Callable[[ResultTable], None]) -> None:
        """``write`` every result table at once: each is a Spark job and a commit of its own, and side by side
        a batch takes as long as the slower one, not the sum (threads that keep the job's scheduler pool)."""
        errors: list[BaseException] = []

        def run(result: ResultTable) -> None:
            try:
                write(result)
            except BaseException as exc:  # noqa: BLE001 - raised below, in the batch's thread
                errors.append(exc)

        threads = [InheritableThread(target=run, args=(r,), name=f"aggregate-{r.rollup.table}") for r in results]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        if errors:
            raise errors[0]

    def _committed(self, rows: int, through_ms: int | None) -> None:
        now = time.time()
        for table in self.tables:
            metrics.LAST_COMMIT.labels(table).set(now)
        metrics.ROWS.labels(self.name, "in").inc(rows)
        if through_ms is not None:
            metrics.AGGREGATE_DELAY.set(now - through_ms / 1000)

    def _start(self, clicks, results: list[ResultTable]) -> None:
        """A result table without progress: from ``from_timestamp_ms`` if given, else the whole table."""
        if self.from_timestamp_ms is None:
            log.info("aggregate: %s: no progress recorded; totals of the whole click table first",
                     ", ".join(r.rollup.table for r in results))
            self._backfill(clicks, results)
            return
        try:
            position = position_before(clicks, self.from_timestamp_ms)
        except PositionLostError as exc:
            raise FatalError(f"{exc}; start later (--from-timestamp) or from the whole table (no start)") from None
        for result in results:
            result.write(result.rows().limit(0), position, None)
        log.info("aggregate: counting clicks committed from %d on (after snapshot %d)", self.from_timestamp_ms,
                 position)

    def _rebuild(self, clicks, results: list[ResultTable], reason: str) -> None:
        if self.settings.pipeline.aggregate_on_snapshot_expired == "fail":
            raise FatalError(
                f"{reason}. Set LAKEHOUSE_PIPELINE__AGGREGATE_ON_SNAPSHOT_EXPIRED=rebuild to recompute from the "
                "whole table, or keep snapshots longer than the aggregates may lag.")
        log.warning("aggregate: %s; rebuilding from the whole click table", reason)
        self._backfill(clicks, results)
        self.rebuilds += 1
        metrics.AGGREGATE_REBUILDS.inc()

    def _backfill(self, clicks, results: list[ResultTable]) -> None:
        """Replace each result table's content by the totals of the click table's current snapshot."""
        current = clicks.current_snapshot()
        if current is None:
            for result in results:
                result.write(result.rows().limit(0), FROM_THE_START, None)
            return
        rows = self._increment_rows(Increment(FROM_THE_START, current.snapshot_id, 0, None))
        # one small Spark job for what the manifests of every snapshot would otherwise be read for
        seen = rows.agg(F.count(F.lit(1)).alias("n"), F.max("ingest_time").alias("t")).first()
        assert seen is not None  # a global aggregate has one row
        through_ms = int(seen.t.timestamp() * 1000) if seen.t is not None else None
        self._each(results, lambda result: result.write(ru.totals(ru.partial_totals(rows, result.rollup), result.rollup),
                                                        current.snapshot_id, through_ms))
        self._committed(seen.n, through_ms)
