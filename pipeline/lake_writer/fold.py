"""Folding a merge-on-read dimension table: small files merged, delete files replaced, one commit.

Each batch leaves a small data file and a position-delete file; readers merge them on every
scan, so their number must stay bounded (issue: "read cost stays flat"). The writer folds
them itself because it alone knows, from its key index, which rows of each file are live
without reading a single delete file:

- files with more than ``rewrite_deleted_share`` of their rows deleted, and **small data files**
  (fewer than ``small_rows``, 100,000 rows) once ``tier_fan_in`` of one size tier have gathered (the
  lake's one tiering rule, ``lakehouse.size_tiers``, in rows), are
  rewritten: their live rows into files of ``target_rows``, each sorted by key; at most
  ``max_rewrite_rows`` rows a fold (the small tiers first, then the most-deleted files), so one
  fold never stalls the apply for long. The share is low because the deleted rows are what readers pay for
  (docs/cdc.md). Sorted files with
  small row groups (``write.parquet.row-group-limit``) keep a point query cheap once changes
  have spread every file over the whole key range: a reader skips all row groups but one;
- **every delete file** is replaced by one file-scoped delete file per kept data file that
  has deleted rows (its exact path bounds let each reader match it to that file alone);
- **the manifests** are written again: one for data, one for deletes.

It is one snapshot (``RowDelta(rewrite=True)``), so a reader sees the table before or after,
never between; a writer that raced it (Spark's compaction) makes the commit fail and the
caller reloads, so no fold can bring back a row a newer commit deleted.
"""

from __future__ import annotations

import logging
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyiceberg.manifest import DataFile, DataFileContent
from pyiceberg.table.metadata import TableMetadata

from lakehouse.size_tiers import full_tiers, tier_bounds
from pipeline.lake_writer.key_index import KeyIndex
from pipeline.lake_writer.live_rows import live_files, read_by_field_id
from pipeline.lake_writer.pyiceberg_internals import CachedTransaction
from pipeline.lake_writer.row_delta import RowDelta, write_data_file, write_position_deletes

log = logging.getLogger(__name__)

#: delete files a fold writes at once. Each object-store upload in flight holds ~35 MiB in its thread (the S3
#: client's buffers; measured: 60 small files through 8 threads +228 MiB, 4 +146, 2 +74): at 10 M keys the fold's
#: eight writers made the apply's peak (1,031 MiB against ~660 between folds). The fold runs beside the batches,
#: so a slower fold costs no freshness
WRITERS = 2


@dataclass(frozen=True)
class FoldPolicy:
    """When the writer folds (every ``fold_files`` batches that added a file) and what a fold rewrites: small
    files by size tier (each ``tier_ratio`` times the one below, merged ``tier_fan_in`` at a time), files more than
    ``rewrite_deleted_share`` deleted, at most ``max_rewrite_rows`` rows, into files of ``target_rows``."""

    fold_files: int = 24
    target_rows: int = 500_000
    rewrite_deleted_share: float = 0.03
    max_rewrite_rows: int = 1_500_000
    tier_fan_in: int = 8
    tier_ratio: float = 4.0

    @property
    def small_rows(self) -> int:
        """Under this a data file is small. A fifth of the target: the initial snapshot's files (batches of
        200,000 rows, sorted key ranges) are not small, so they stay as written instead of being merged after the
        snapshot, a long fold while the changes wait (docs/cdc.md)."""
        return self.target_rows // 5


def _to_rewrite(data: list[DataFile], index: KeyIndex, policy: FoldPolicy) -> list[DataFile]:
    """The data files this fold rewrites, within ``max_rewrite_rows``: each size tier holding ``tier_fan_in`` or more
    small files, then the much-deleted ones, most deleted first.

    Tiers, not every small file each time: merging all small files at every fold wrote a changed
    row again at each fold until its file grew past ``small_rows`` (~10 times). Merged by size, a
    row is written about three times (its batch, then once per tier) before it rests in a large file.
    """
    live = index.live_per_file()
    share = {f.file_path: (f.record_count - live.get(index.number(f.file_path), 0)) / max(f.record_count, 1)
             for f in data}
    deleted = sorted((f for f in data if share[f.file_path] > policy.rewrite_deleted_share),
                     key=lambda f: -share[f.file_path])
    much_deleted = {f.file_path for f in deleted}
    small = [f for f in data if f.record_count < policy.small_rows and f.file_path not in much_deleted]
    bounds = tier_bounds(1, policy.small_rows, policy.tier_ratio)
    tiered = [f for tier in full_tiers(small, lambda f: f.record_count, bounds, policy.tier_fan_in) for f in tier]
    chosen: list[DataFile] = []
    rows = 0
    # tiers first: small, and what keeps the file count bounded; rewriting large files for their
    # deletes first starved them (at 10 M rows the deletes alone filled most folds' budget)
    for file in tiered + deleted:
        if chosen and rows + file.record_count > policy.max_rewrite_rows:
            continue
        chosen.append(file)
        rows += file.record_count
    return chosen


@dataclass(frozen=True)
class FoldPlan:
    """What a fold rewrites, fixed when it starts; the rows are named by their keys' hashes, not by index slots
    (new keys inserted into the index while the fold runs move the slots)."""

    metadata: TableMetadata  # the table's metadata at the start: schema, spec and properties for the files it writes
    rewrite: list[DataFile]
    old_deletes: list[DataFile]
    paths: dict[int, str]  # file number -> path, of the files rewritten
    numbers: np.ndarray  # the live rows of those files at the start: (file number, position), by file then position
    positions: np.ndarray
    a: np.ndarray  # and their keys' hashes
    b: np.ndarray
    kept_deletes: list[tuple[DataFile, np.ndarray]]  # each kept file's positions deleted at the start
    began: float


@dataclass(frozen=True)
class WrittenFold:
    """The files a fold wrote; for each new data file its rows' keys and where they were at the start, in file
    order."""

    data: list[tuple[DataFile, np.ndarray, np.ndarray, np.ndarray, np.ndarray]]  # file, a, b, start number, position
    deletes: list[DataFile]


def plan_fold(table, index: KeyIndex, policy: FoldPolicy) -> FoldPlan | None:
    """The fold due now (``_to_rewrite``), or None when there is nothing to fold."""
    entries = live_files(table)
    return plan_fold_of(table.metadata, [e.data_file for e in entries], index, policy)


def plan_fold_of(metadata: TableMetadata, files: list[DataFile], index: KeyIndex,
                 policy: FoldPolicy) -> FoldPlan | None:
    """The fold due now among ``files`` (live data and delete files whose rows ``index`` knows), or None."""
    began = time.monotonic()
    data = [f for f in files if f.content == DataFileContent.DATA]
    old_deletes = [f for f in files if f.content != DataFileContent.DATA]
    rewrite = _to_rewrite(data, index, policy)
    if not rewrite and not old_deletes:
        return None
    rewritten = {f.file_path for f in rewrite}
    slots, numbers, positions = index.rows_in([index.number(f.file_path) for f in rewrite])
    kept = [f for f in data if f.file_path not in rewritten]
    return FoldPlan(metadata, rewrite, old_deletes, {index.number(f.file_path): f.file_path for f in rewrite},
                    numbers, positions, index.a[slots], index.b[slots], _deleted_positions(index, kept), began)


def write_fold(plan: FoldPlan, io, location_provider, key: str, target_rows: int,
               bucket: int | None = None) -> WrittenFold:
    """The fold's files (nothing committed): the live rows sorted by key into files of ``target_rows``, and one
    file-scoped delete file per kept file with deleted rows. Touches neither the table nor the index, so the
    writer's batches go on committing while it runs (``DimensionWriter``). ``bucket``: the key bucket whose
    files these are (``pipeline.cdc.buckets``)."""
    schema = plan.metadata.schema().as_arrow()
    data = []
    for chunk in range(0, len(plan.numbers), target_rows):
        part = slice(chunk, chunk + target_rows)
        rows = _live_rows(io, plan.paths, schema, plan.numbers[part], plan.positions[part])
        order = pc.sort_indices(rows, [(key, "ascending")])
        taken = order.to_numpy()
        written = write_data_file(plan.metadata, io, rows.take(order), bucket)
        data.append((written, plan.a[part][taken], plan.b[part][taken], plan.numbers[part][taken],
                     plan.positions[part][taken]))

    def deletes_of(item: tuple[DataFile, np.ndarray]) -> DataFile:
        file, gone = item
        return write_position_deletes(plan.metadata, io, location_provider, pa.table({
            "file_path": pa.array([file.file_path] * len(gone), pa.string()), "pos": pa.array(gone, pa.int64())}),
            bucket)

    # one small file per kept data file with deleted rows (~60 at 10 M rows): written side by side, each is
    # mostly an object-store round trip
    with ThreadPoolExecutor(WRITERS, thread_name_prefix="fold-deletes") as pool:
        deletes = list(pool.map(deletes_of, plan.kept_deletes))
    return WrittenFold(data, deletes)


def commit_fold(table, index: KeyIndex, plan: FoldPlan, written: WrittenFold) -> None:
    """One ``replace`` commit of a written fold, and the index moved to the new files.

    Rows a batch changed or deleted after the fold started are stale in the new files: their key no longer
    points where it did at the start. They get a position delete in the same commit, so the table holds the same
    rows before and after it. A file the fold removes that is no longer live (another writer replaced it) fails
    the commit (``RowDelta``); the caller then drops the fold.
    """
    moved, stale = [], []
    for file, a, b, numbers, positions in written.data:
        slots = index.slots(a, b)
        found = slots >= 0
        here = np.zeros(len(slots), dtype=bool)
        here[found] = (index.file[slots[found]] == numbers[found]) & (index.pos[slots[found]] == positions[found])
        moved.append((file, slots[here], np.flatnonzero(here)))
        if not here.all():
            stale.append((file.file_path, np.flatnonzero(~here)))
    with CachedTransaction(table) as tx:
        delta = RowDelta(tx, table.io, {}, rewrite=True, same_rows=True)
        with delta:
            for file in plan.rewrite + plan.old_deletes:
                delta.remove(file)
            for file, *_ in written.data:
                delta.add(file)
            for file in written.deletes:
                delta.add(file)
            if stale:
                delta.add(write_position_deletes(tx.table_metadata, table.io, table.location_provider(), pa.table({
                    "file_path": pa.array([path for path, rows in stale for _ in rows], pa.string()),
                    "pos": pa.array(np.concatenate([rows for _, rows in stale]), pa.int64())})))
    for file, slots, rows in moved:
        index.move(slots, index.number(file.file_path), rows)
    log.info("dims: folded %s: %d files rewritten (%d rows, %d changed while folding), %d delete files replaced, "
             "in %.2fs", table.name(), len(plan.rewrite), len(plan.numbers), sum(len(r) for _, r in stale),
             len(plan.old_deletes), time.monotonic() - plan.began)


def fold(table, index: KeyIndex, policy: FoldPolicy) -> None:
    """One folding commit on ``table``, start to end (see the module); updates ``index`` once it committed."""
    plan = plan_fold(table, index, policy)
    if plan is None:
        return
    key = table.schema().find_column_name(table.schema().identifier_field_ids[0])
    commit_fold(table, index, plan, write_fold(plan, table.io, table.location_provider(), key, policy.target_rows))


def _live_rows(io, paths: dict[int, str], schema: pa.Schema, numbers: np.ndarray, positions: np.ndarray) -> pa.Table:
    """The rows at (file number, position), in that order (grouped by file, as ``rows_in`` gives them)."""
    parts = [read_by_field_id(io, paths[number], schema).take(pa.array(positions[numbers == number]))
             for number in dict.fromkeys(numbers.tolist())]
    return pa.concat_tables(parts) if parts else schema.empty_table()


def _deleted_positions(index: KeyIndex, files: list[DataFile]) -> list[tuple[DataFile, np.ndarray]]:
    """Each file's positions that no live key points at (its deleted rows), for the files that have any.

    One pass over the index without a sort: each live row's position in the files laid end to end
    (a table from file number to where its rows start), cleared in one mask. Through ``rows_in``
    (a sort of every live row, ~9.5 M at 10 M keys) this took seconds of the batch that planned
    the fold, the one batch a fold still delayed.
    """
    numbers_of = [index.number(f.file_path) for f in files]
    counts = np.array([f.record_count for f in files], dtype=np.int64)
    offsets = np.concatenate(([0], np.cumsum(counts)))
    starts = np.full(len(index.files) + 1, -1, dtype=np.int64)  # one more: a deleted key's file -1 reads it, -1
    starts[numbers_of] = offsets[:-1]
    mask = np.ones(int(offsets[-1]), dtype=bool)
    for numbers, positions in index.pieces():  # a piece at a time: at once, 240 MB of temporaries at 10 M keys
        start = starts[numbers]
        kept = start >= 0
        mask[start[kept] + positions[kept]] = False
    out = []
    for file, lo, hi in zip(files, offsets[:-1], offsets[1:], strict=True):
        gone = np.flatnonzero(mask[lo:hi])
        if len(gone):
            out.append((file, gone))
    return out
