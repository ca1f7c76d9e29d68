"""What a standing task of the click job does with its share of each batch: read, validate, enrich, write Parquet.

The driver (``pipeline.clicks.job``) sends each of its standing Spark tasks
(``pipeline.standing_tasks``) a ``ClickWork`` a batch: the task's Kafka partitions' offset
ranges, the table's shape and, when they changed, the dimension snapshot and the click
table's metadata. The task reads the ranges with the consumer it keeps (``RangeReader``),
parses and enriches them (``evolving_batch.parse``), writes the valid rows as Parquet data
files of the click table in its write order, and answers with the files and the batch's
counts (dead letters carried back in ``BatchStats``). It keeps the rows of the files it wrote
(``KeptRows``), so the first-level merges the driver asks for with the next work
(``pipeline.clicks.file_merges``) are written from memory, nothing read back. A large share (a backlog after a stop)
is done in turns of at most ``TURN_RECORDS`` records, so a task's memory holds one turn, not
the whole share. It commits nothing: the driver commits
every task's files with the batch's end offsets in one snapshot, so files of a batch that
fails are never part of the table (maintenance removes them as orphans).
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from pyiceberg.io import load_file_io

from pipeline.clicks import evolving_batch
from pipeline.clicks.batch_stats import BatchStats, count_batch
from pipeline.clicks.evolution import Shape
from pipeline.clicks.validate import Limits
from pipeline.dimensions import Dimensions
from pipeline.kafka_source.range_reader import RangeReader
from pipeline.kafka_source.ranges import OffsetRange, pieces
from pipeline.lake_writer.pyiceberg_internals import data_files_of
from pipeline.tables import CLICKS_WRITE_ORDER

log = logging.getLogger(__name__)

#: records a task reads, parses and writes at once: a larger share is done in turns of this many
TURN_RECORDS = 100_000

#: Arrow bytes of rows a task keeps for the merges of the files it wrote (the oldest file's go first past it)
KEEP_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True)
class ClickWork:
    """One task's share of a batch, as the driver sends it."""

    ranges: list[OffsetRange]  # the task's partitions, idle ones too (its consumer keeps them assigned)
    shape: Shape
    limits: Limits
    ingest_time: dt.datetime
    planned_at_ms: int
    dimensions: Dimensions | None  # a new snapshot, or None: the one sent before still holds
    table: tuple[Any, dict[str, str]] | None  # (TableMetadata, FileIO properties) when the schema or spec changed
    merges: tuple[tuple[str, ...], ...] = ()  # paths of files this task wrote, each group to write again as one


@dataclass(frozen=True)
class ClickShare:
    """A task's answer: the data files it wrote (not committed) and what it counted."""

    files: list[Any]  # pyiceberg DataFile
    stats: BatchStats
    #: per merge the work carried: the paths written again and the files now holding their rows, or None
    merged: list[tuple[frozenset[str], list[Any]] | None] = field(default_factory=list)


class KeptRows:
    """The rows of the data files a task wrote, by path, up to ``limit`` Arrow bytes (the oldest files' go first)."""

    def __init__(self, limit: int = KEEP_BYTES):
        self.limit = limit
        self._rows: dict[str, pa.Table] = {}
        self._bytes = 0

    def keep(self, path: str, rows: pa.Table) -> None:
        self._rows[path] = rows
        self._bytes += rows.nbytes
        while self._bytes > self.limit and self._rows:
            self._bytes -= self._rows.pop(next(iter(self._rows))).nbytes

    def take(self, paths: Iterable[str]) -> dict[str, pa.Table]:
        """The kept rows of ``paths`` (those still kept), no longer kept."""
        taken = {p: self._rows.pop(p) for p in paths if p in self._rows}
        self._bytes -= sum(t.nbytes for t in taken.values())
        return taken

    def clear(self) -> None:
        self._rows, self._bytes = {}, 0


class ClickTask:
    """The worker of one standing task: its consumer, and the dimensions and table metadata last sent."""

    def __init__(self, bootstrap: str, fetch_wait_ms: int):
        self.reader = RangeReader(bootstrap, fetch_wait_ms, purpose="clicks-reader")
        self.dimensions: Dimensions | None = None
        self.metadata: Any = None
        self.io: Any = None
        self.kept = KeptRows()

    def __call__(self, work: ClickWork) -> ClickShare | None:
        """Do ``work``; ``None`` when its records carry fields the table has no column for (the driver then writes
        the batch as an evolving batch: schema change and rows in one commit)."""
        if work.dimensions is not None:
            self.dimensions = work.dimensions
        if work.table is not None:
            self.metadata = work.table[0]
            self.io = load_file_io(work.table[1], self.metadata.location)
            self.kept.clear()  # rows of the old schema: their files are maintenance's to merge
        assert self.dimensions is not None and self.metadata is not None, "the driver sends both with the first work"
        stats = BatchStats()
        files: list = []
        spent = {"fetch": 0.0, "transform": 0.0, "write": 0.0, "merge": 0.0}
        began = time.perf_counter()
        # before this batch's rows are kept: keeping them may push out the rows a merge is about to take
        merged = [self._merge(paths) for paths in work.merges]
        spent["merge"] = time.perf_counter() - began
        for turn in pieces(work.ranges, TURN_RECORDS):
            began = time.perf_counter()
            raw = self.reader.read(turn)
            fetched = time.perf_counter()
            spent["fetch"] += fetched - began
            if raw.num_rows == 0:
                continue
            parsed, changes, _ = evolving_batch.parse([raw], work.shape, work.limits, self.dimensions)
            if changes:
                return None
            for part in parsed:
                stats.merge(count_batch(part, work.planned_at_ms))
            transformed = time.perf_counter()
            rows = evolving_batch.click_rows(pa.Table.from_batches(parsed), work.shape, work.ingest_time)
            if rows.num_rows:
                files.extend(self._write(rows))
            spent["transform"] += transformed - fetched
            spent["write"] += time.perf_counter() - transformed
        stats.task_seconds.update(spent)
        return ClickShare(files, stats, merged)

    def _write(self, rows: pa.Table) -> list:
        """``rows`` as data files; the rows are kept when they make one file (one day-partition: nearly always)."""
        written = list(data_files_of(self.metadata, rows, self.io))
        if len(written) == 1:
            self.kept.keep(written[0].file_path, rows)
        return written

    def _merge(self, paths: tuple[str, ...]) -> tuple[frozenset[str], list] | None:
        """The rows of the files at ``paths`` this task still keeps, written again as one file (more past the
        table's target size); None when fewer than two are kept (the rest are maintenance's to merge)."""
        kept = self.kept.take(paths)
        if len(kept) < 2:
            return None
        try:
            rows = pa.concat_tables(list(kept.values()), promote_options="default").sort_by(CLICKS_WRITE_ORDER)
            return frozenset(kept), list(data_files_of(self.metadata, rows, self.io))
        except Exception as exc:  # noqa: BLE001 - the batch goes on: the files stay in the table, maintenance's
            log.warning("clicks task: merging %d files failed (%s); maintenance merges them instead", len(kept), exc)
            return None

    def close(self) -> None:
        self.reader.close()
