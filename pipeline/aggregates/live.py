"""`lakehouse run aggregate`: live aggregates that follow the click table's appends, without Spark.

Each micro-batch reads the rows the click table's new ``append`` snapshots added
(``pipeline.aggregates.increments``), adds them to the totals the job holds in memory
(``pipeline.aggregates.rollups``) and rewrites each small result table in one PyIceberg
commit whose summary records the newest click snapshot it includes. That snapshot id is the
job's only position: a restart reads it back from the result tables, so a batch is counted
once whatever dies when (no checkpoint beside the tables).

Why not Spark: the streaming read and two MERGEs cost six Spark stages a batch, which on
two cores queued behind the click job's and left the aggregates 26 s behind the clicks
(docs/performance.md, "Fifth round"); here a batch is a few manifests, the new files, and
milliseconds of Arrow.

When the snapshot a result table stands on was expired by maintenance, the job rebuilds
(``pipeline.aggregate_on_snapshot_expired = rebuild``, default): totals of the whole table
at its current snapshot, written in one commit, then on from there; ``fail`` stops instead.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections import defaultdict

import pyarrow as pa
from pyiceberg.exceptions import NoSuchTableError

from lakehouse.catalog import pyiceberg_catalog
from lakehouse.errors import FatalError, LakehouseError
from lakehouse.settings import Settings
from pipeline import metrics
from pipeline.aggregates import rollups as ru
from pipeline.aggregates.increments import (
    FROM_THE_START,
    Increment,
    PositionLostError,
    newest_ingest_ms,
    position_before,
    read_increment,
    snapshots_after,
)
from pipeline.aggregates.tables import ensure_aggregate_tables
from pipeline.pyiceberg_tables import commit_attempts, newest_summary_with, replace_contents

log = logging.getLogger(__name__)

#: most click snapshots one batch reads (a job catching up commits every this many)
SNAPSHOTS_PER_BATCH = 200


class ResultTable:
    """One rollup's result table: its totals and position, kept in memory between commits."""

    def __init__(self, catalog, rollup: ru.Rollup):
        self.catalog, self.rollup = catalog, rollup
        self.reload()

    def reload(self) -> None:
        """Read the committed totals and position (None: nothing committed by this release's job yet)."""
        self.table = self.catalog.load_table(self.rollup.table)
        self.arrow_schema = self.table.schema().as_arrow()
        recorded = newest_summary_with(self.table, ru.PROGRESS_PROPERTY).get(ru.PROGRESS_PROPERTY)
        self.position: int | None = int(recorded) if recorded is not None else None
        self.totals = ru.from_arrow(self.table.scan().to_arrow(), self.rollup) if self.position is not None else {}

    def add(self, rows: pa.Table, position: int, through_ms: int | None) -> None:
        """Add click ``rows`` to the totals and record ``position``, in one commit."""
        started_from = self.position
        for attempt in commit_attempts():
            with attempt:
                if attempt.retry_state.attempt_number > 1:
                    self.reload()  # another writer (maintenance) committed first: start from what is there
                    if self.position != started_from:
                        raise LakehouseError(f"{self.rollup.table} moved to snapshot {self.position} under the job")
                ru.add_rows(self.totals, rows, self.rollup, dt.datetime.now(dt.timezone.utc))
                self._overwrite(self.totals, position, through_ms)
        self.position = position

    def replace(self, totals: dict[ru.Key, ru.Totals], position: int, through_ms: int | None) -> None:
        """Make ``totals`` the table's whole content and record ``position``, in one commit."""
        for attempt in commit_attempts():
            with attempt:
                if attempt.retry_state.attempt_number > 1:
                    self.reload()
                self._overwrite(totals, position, through_ms)
        self.totals, self.position = totals, position

    def _overwrite(self, totals: dict[ru.Key, ru.Totals], position: int, through_ms: int | None) -> None:
        properties = {ru.PROGRESS_PROPERTY: str(position)}
        if through_ms is not None:
            properties[ru.THROUGH_PROPERTY] = str(through_ms)
        replace_contents(self.table, ru.to_arrow(totals, self.rollup, self.arrow_schema), properties)


class LiveAggregates:
    """The live-aggregates job; ``spark`` is accepted, unused, so every job is built the same way."""

    name = "aggregate"

    def __init__(self, spark, settings: Settings, from_timestamp_ms: int | None = None):
        self.settings = settings
        self.rollups = ru.rollups(settings)
        self.tables = [r.table for r in self.rollups]
        self.from_timestamp_ms = from_timestamp_ms
        self.catalog = pyiceberg_catalog(settings)
        ensure_aggregate_tables(settings, self.catalog)
        self.rebuilds = 0
        self.recover()

    def recover(self) -> None:
        self.results = [ResultTable(self.catalog, r) for r in self.rollups]
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
                added += self._apply(read_increment(clicks, snapshots, ru.SOURCE_COLUMNS), results)
        if not added:
            metrics.BATCHES.labels(self.name, "idle").inc()
            return 0
        metrics.BATCHES.labels(self.name, "committed").inc()
        metrics.BATCH_SECONDS.labels(self.name).observe(time.monotonic() - began)
        return added

    def _apply(self, increment: Increment, results: list[ResultTable]) -> int:
        for skipped in increment.skipped:
            log.warning("aggregate: %s changes rows of the click table in place; the totals keep them as they were "
                        "(rebuild: delete the result tables)", skipped)
        if increment.rows.num_rows == 0:
            for result in results:  # only compactions: nothing to count, the position moves on in memory
                result.position = increment.snapshot_id
            return 0
        began = time.monotonic()
        through_ms = increment.through_ms
        for result in results:
            result.add(increment.rows, increment.snapshot_id, through_ms)
        self._committed(increment.rows.num_rows, through_ms)
        log.info("aggregate: %d click rows up to snapshot %d merged in %.2fs", increment.rows.num_rows,
                 increment.snapshot_id, time.monotonic() - began)
        return increment.rows.num_rows

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
            result.replace({}, position, None)
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
        totals: list[dict[ru.Key, ru.Totals]] = [{} for _ in results]
        rows, through_ms = 0, None
        if current is not None:
            now = dt.datetime.now(dt.timezone.utc)
            scan = clicks.scan(snapshot_id=current.snapshot_id, selected_fields=ru.SOURCE_COLUMNS)
            for batch in scan.to_arrow_batch_reader():  # the table's size in files, never in memory at once
                part = pa.Table.from_batches([batch])
                for result, into in zip(results, totals, strict=True):
                    ru.add_rows(into, part, result.rollup, now)
                rows += part.num_rows
                newest = newest_ingest_ms(part)
                through_ms = max(filter(None, (through_ms, newest)), default=None)
        position = current.snapshot_id if current is not None else FROM_THE_START
        for result, into in zip(results, totals, strict=True):
            result.replace(into, position, through_ms)
        self._committed(rows, through_ms)
