"""The Python apply peer's writer (``lab.peers.cdc_python``): one batch of changes into one dimension table,
the newest change per key, in one Iceberg commit, from one process (the product's apply is
``pipeline.cdc.apply``, on Spark).

Why it was built on the driver with PyIceberg rather than Spark's ``MERGE INTO``: a batch is a few hundred
changes against a table of thousands of rows. The MERGE ran two Spark jobs a batch (2.0 s on
an idle machine); with the whole system on two cores its tasks queued behind the click
batches', a MERGE took 5-9 s and a price change took 17 s (p95) to reach the table
(docs/performance.md, "Fourth round"). Here a batch is milliseconds of Arrow work and one
commit carrying the topic's offsets, atomic as the MERGE was (``DimensionWriter`` says how it
writes). Applying a batch twice gives the same rows, so a replay after a crash is harmless
(``lab.peers.cdc_python``).
"""

from __future__ import annotations

import json
import logging
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyiceberg.exceptions import CommitFailedException, ValidationException
from pyiceberg.io.pyarrow import schema_to_pyarrow
from pyiceberg.manifest import ManifestContent
from pyiceberg.table.snapshots import Operation

from lakehouse.job_settings import MaintenanceSettings
from pipeline.capture.schema_history import SchemaRecord
from pipeline.cdc.images import after_fields, after_images, newest_per_key
from pipeline.cdc.table_evolution import HISTORY_PROPERTY, ColumnEvolution, plan, stage
from pipeline.cdc.targets import SchemaNotYetRecorded
from pipeline.lake_writer.catalog_tables import commit_attempts
from pipeline.lake_writer.expiry import expire_old_snapshots
from pipeline.lake_writer.fold import FoldPlan, FoldPolicy, WrittenFold, commit_fold, fold, plan_fold, write_fold
from pipeline.lake_writer.key_index import ABSENT, KeyIndex, key_hashes
from pipeline.lake_writer.live_rows import FileCounts, live_files, read_index
from pipeline.lake_writer.pyiceberg_internals import CachedTransaction, OverwriteFiles, data_files_of
from pipeline.lake_writer.row_delta import RowDelta, write_data_file, write_position_deletes
from pipeline.native_memory import give_back_freed

log = logging.getLogger(__name__)


def live_data_files(table) -> list:
    """The data files of the table's current snapshot."""
    current = table.current_snapshot()
    return [entry.data_file
            for manifest in (current.manifests(table.io) if current else ())
            if manifest.content == ManifestContent.DATA
            for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=True)]


class _ReplaceAll(OverwriteFiles):
    """An overwrite that deletes every live data file, so no manifest of the parent carries on.

    PyIceberg 0.12's overwrite keeps each parent manifest none of whose live files it deletes,
    and a manifest of only deleted entries (what every overwrite leaves) is one: they pile up,
    one more a commit, and every commit reads them all, so commits grow slower without end.
    """

    def _existing_manifests(self) -> list:
        return []


def replace_contents(table, rows: pa.Table, properties: dict[str, str], before=None) -> None:
    """One snapshot: every data file of ``table`` out, ``rows`` in (one file for a small table).

    For the small tables whose one writer holds their whole content (dimensions, aggregate
    results): PyIceberg's ``overwrite`` is a delete and an append, two snapshots with a
    manifest list each, and a row-level delete reads and rewrites every file that may hold a
    changed key. Replacing the files costs one new file and one snapshot whatever changed.
    Delete files of older writers go too: they applied to the data files replaced. ``before(tx)``,
    if given, stages other changes first (a schema update) and returns snapshot properties.
    """
    with CachedTransaction(table) as tx:
        if before is not None:  # e.g. a schema change staged in the same commit (returns snapshot properties)
            properties = {**properties, **before(tx)}
        operation = Operation.OVERWRITE if table.current_snapshot() else Operation.APPEND
        with _ReplaceAll(operation, tx, table.io, snapshot_properties=properties) as producer:
            for data_file in live_data_files(table):
                producer.delete_data_file(data_file)
            if rows.num_rows:
                for data_file in data_files_of(tx.table_metadata, rows, table.io, write_uuid=producer.commit_uuid):
                    producer.append_data_file(data_file)


@dataclass(frozen=True)
class Evolution:
    """A batch's schema change: what changes, the record it follows, and the Arrow schema rows are written in."""

    changes: list[ColumnEvolution]
    source: SchemaRecord
    arrow: pa.Schema

class DimensionWriter:
    """Applies batches to one dimension table through a catalog of its own (one thread uses it).

    The job is the table's only writer of rows, so the writer knows where every key's live
    row is (``KeyIndex``), read on ``reload`` (start, recovery, a commit that lost a race
    with another writer, such as a compaction by Spark) and kept up to date by each commit.

    While the table is small (``whole_table_rows``: a product catalogue, member levels) a
    batch replaces its content: one file, one snapshot, nothing for readers to merge. A larger
    table is written *merge-on-read*: a batch adds one data file of its after-images and one
    position-delete file naming the rows they replace (or delete), found through the index,
    so a batch costs what it changes, whatever the table's size (docs/cdc.md has the
    figures). No delete is written for a key no file holds. Every ``policy.fold_files``
    batches the writer folds the small files and the delete files (``pipeline.lake_writer.fold``):
    readers never merge more than a bounded number of them.
    """

    def __init__(self, catalog, table: str, key: str, columns: dict[str, str], whole_table_rows: int = 50_000,
                 policy: FoldPolicy | None = None, renames: dict[str, str] | None = None, background_folds: bool = True,
                 retention: MaintenanceSettings | None = None):
        self.catalog, self.name, self.key, self.columns = catalog, table, key, dict(columns)
        self.renames = renames or {}
        self.whole_table_rows = whole_table_rows
        self.policy = policy or FoldPolicy()
        self.retention = retention  # the snapshots' retention rule (the settings' defaults if None)
        # one fold at a time, written beside the batches (``_fold_step``); off: each fold runs inside the batch's
        # apply() that made it due, start to end (the tests that count files after each batch)
        self._folder = ThreadPoolExecutor(1, thread_name_prefix="fold") if background_folds else None
        self._folding: tuple[FoldPlan, Future] | None = None
        self.reload()

    def reload(self) -> None:
        """Read the table's current metadata and where each key lives (its rows too, when it is small).

        A fold being written is dropped: its plan names file numbers of the index read before.
        """
        self._drop_fold()
        self.index: KeyIndex | None = None  # the old index is let go before the new one is read: one at a time in memory
        self.rows: dict[str, dict] | None = None
        self.table = self.catalog.load_table(self.name)
        self.schema = self.table.schema().as_arrow()
        self.index = read_index(self.table, self.key)
        self.counts: FileCounts = FileCounts.of(live_files(self.table), self.policy)
        if len(self.index) <= self.whole_table_rows:
            # keyed as the change envelopes name keys, as text: a BIGINT key read back as an int would not match
            self.rows = {str(row[self.key]): row for row in self.table.scan().to_arrow().to_pylist()}

    @property
    def live_keys(self) -> int:
        return len(self.rows) if self.rows is not None else len(self._index())

    def _index(self) -> KeyIndex:
        if self.index is None:  # the small table's content was replaced since: read where its keys are now
            self.index = read_index(self.table, self.key)
        return self.index

    def apply(self, changes: pa.Table, properties: dict[str, str], source: SchemaRecord | None = None) -> None:
        """The batch's newest change per key into the table, with ``properties``, in one commit.

        ``source``: the newest schema the capture recorded for the table; a column it adds that
        the batch carries, or a type it widens, changes the table in the same commit
        (``pipeline.cdc.table_evolution``).
        """
        newest = newest_per_key(changes)
        unknown = after_fields(newest) - set(self.columns.values())
        if unknown and (source is None or any(source.schema.column(f) is None for f in unknown)):
            raise SchemaNotYetRecorded(f"{self.name}: changes carry {sorted(unknown)}, which no schema record of the "
                                       "capture names yet; retried once it is readable")
        batch_keys = newest.column("pk").combine_chunks()  # Python strings only for a small table's rows
        kept = pc.not_equal(newest.column("op").combine_chunks(), "d")
        upserts = pc.sum(kept).as_py() or 0
        for attempt in commit_attempts():
            with attempt:
                if attempt.retry_state.attempt_number > 1:
                    log.info("dims: %s changed under the commit; applying the batch again", self.name)
                    self.reload()
                evolve = self._evolution(source, unknown)
                columns = {**self.columns, **({c.column: c.source for c in evolve.changes} if evolve else {})}
                images = after_images(newest, columns, evolve.arrow if evolve else self.schema)
                if self.rows is not None and len(self.rows) + upserts <= self.whole_table_rows:
                    self._drop_fold()
                    self.rows = self._replace(batch_keys.to_pylist(), batch_keys.filter(kept).to_pylist(), images,
                                              properties, evolve)
                    self.index = None
                else:
                    self.rows = None
                    self._row_delta(batch_keys, kept.to_numpy(zero_copy_only=False), images, properties, evolve)
                if evolve:
                    self.schema, self.columns = evolve.arrow, columns
                    log.warning("dims: %s follows its source: %s", self.name,
                                ", ".join(f"{c.action} {c.column} {c.type}" for c in evolve.changes))
        if self.rows is None:
            self._fold_step()

    def _fold_step(self) -> None:
        """Between batches: commit the fold written meanwhile, or start the one now due.

        Why in the background: a fold rewrites up to ``max_rewrite_rows`` rows; run inside a batch it
        was seconds in which no change committed (at 10 M rows, apply freshness p95 5.0-5.7 s against
        1.3 s at p50). Written beside the batches it costs them only its CPU; its commit, between two
        batches, is one small delete file (the rows they changed meanwhile) and the manifests.
        """
        if self._folding is not None:
            plan, written = self._folding
            if written.done():
                self._folding = None
                self._commit_fold(plan, written.result())
        elif self.counts.due(self.policy):
            if self._folder is None:
                self.fold()
                return
            due = plan_fold(self.table, self._index(), self.policy)
            if due is None:
                self.counts.since_fold = 0
                return
            self._folding = (due, self._folder.submit(write_fold, due, self.table.io, self.table.location_provider(),
                                                      self.key, self.policy.target_rows))

    def _commit_fold(self, plan: FoldPlan, written: WrittenFold) -> None:
        try:
            commit_fold(self.table, self._index(), plan, written)
        except (CommitFailedException, ValidationException) as exc:  # another writer came first: fold again later
            log.info("dims: fold of %s dropped (%s); the next one is planned from the new head", self.name, exc)
            self.reload()
            return
        self.counts = FileCounts.of(live_files(self.table), self.policy)
        expire_old_snapshots(self.table, self.retention)
        give_back_freed()  # the fold's NumPy arrays and Python objects (Arrow keeps its own pool), freed in its thread

    def wait_for_fold(self) -> None:
        """Until the fold being written (if any) is committed (tests, and a clean stop)."""
        if self._folding is not None:
            plan, written = self._folding
            self._folding = None
            self._commit_fold(plan, written.result())

    def _drop_fold(self) -> None:
        folding, self._folding = getattr(self, "_folding", None), None
        if folding is not None:
            folding[1].cancel()

    def close(self) -> None:
        """Stop folding; a fold being written is dropped (its files are never committed: maintenance's orphan
        cleanup removes them)."""
        self._drop_fold()
        if self._folder is not None:
            self._folder.shutdown(wait=True, cancel_futures=True)

    def fold(self) -> None:
        """Fold small files and delete files now, start to end (``pipeline.lake_writer.fold``); a lost race only
        postpones it."""
        self._drop_fold()
        for attempt in commit_attempts():
            with attempt:
                if attempt.retry_state.attempt_number > 1:
                    self.reload()
                fold(self.table, self._index(), self.policy)
        self.counts = FileCounts.of(live_files(self.table), self.policy)
        expire_old_snapshots(self.table, self.retention)

    def _evolution(self, source: SchemaRecord | None, unknown: set[str]) -> Evolution | None:
        """The schema change this batch's commit must carry: the columns it brings, the types widened."""
        if source is None:
            return None
        changes = [c for c in plan(self.table.schema(), source, self.renames)
                   if c.action == "widened" or c.source in unknown]
        if not changes:
            return None
        schema = self.table.schema()
        fields = {f.name: f for f in schema.fields}
        arrow = schema.as_arrow()
        for change in changes:
            kind = schema_to_pyarrow(change.type)
            if change.action == "added":
                arrow = arrow.append(pa.field(change.column, kind, nullable=True))
            else:
                arrow = arrow.set(arrow.get_field_index(change.column),
                                  pa.field(change.column, kind, nullable=not fields[change.column].required))
        return Evolution(changes, source, arrow)

    def _staged(self, evolve: Evolution | None):
        """A function staging ``evolve`` in a transaction (None when nothing changes)."""
        if evolve is None:
            return None
        history = json.loads(self.table.properties.get(HISTORY_PROPERTY, "[]"))
        return lambda tx: stage(tx, evolve.changes, evolve.source, history)

    def _replace(self, batch_keys: list[str], upserted: list[str], images: pa.Table,
                 properties: dict[str, str], evolve: Evolution | None = None) -> dict[str, dict]:
        rows = dict(self.rows or {})
        for key in batch_keys:
            rows.pop(key, None)
        rows.update(zip(upserted, images.to_pylist(), strict=True))
        content = pa.Table.from_pylist(list(rows.values()), schema=images.schema)
        if not self.counts.deletes:
            replace_contents(self.table, content, properties, self._staged(evolve))
            return rows
        # a table that shrank back under whole_table_rows still has delete files: a row delta that removes
        # every file, so the delete files leave with proper entries (replace_contents drops only data files)
        with CachedTransaction(self.table) as tx:
            staged = self._staged(evolve)
            delta = RowDelta(tx, self.table.io, {**properties, **(staged(tx) if staged else {})}, rewrite=True)
            with delta:
                for entry in live_files(self.table):
                    delta.remove(entry.data_file)
                if content.num_rows:
                    delta.add(write_data_file(tx.table_metadata, self.table.io, content))
        self.counts = FileCounts(0, 0)
        return rows

    def _row_delta(self, batch_keys: pa.Array, kept: np.ndarray, images: pa.Table,
                   properties: dict[str, str], evolve: Evolution | None = None) -> None:
        """One snapshot: the after-images as a data file, the rows they replace as position deletes.

        ``kept``: which of ``batch_keys`` are not deleted; their after-images are ``images``, in that order.
        The keys are hashed once, and the index learns where each now is in one step (hashing and
        looking up each key three times was a fifth of the apply's time in a 10 M-row snapshot).
        """
        index = self._index()
        a, b = key_hashes(batch_keys)
        numbers, positions = index.locate_hashed(a, b)
        found = numbers != ABSENT
        deletes = pa.table({"file_path": pa.array([index.files[n] for n in numbers[found]], pa.string()),
                            "pos": pa.array(positions[found], pa.int64())})
        with CachedTransaction(self.table) as tx:
            staged = self._staged(evolve)
            delta = RowDelta(tx, self.table.io, {**properties, **(staged(tx) if staged else {})})
            with delta:
                data = write_data_file(tx.table_metadata, self.table.io, images) if images.num_rows else None
                if data is not None:
                    delta.add(data)
                if deletes.num_rows:
                    delta.add(write_position_deletes(tx.table_metadata, self.table.io,
                                                     self.table.location_provider(), deletes))
        now_in = np.full(len(batch_keys), ABSENT, dtype=np.int32)  # a deleted key: no file
        now_at = np.zeros(len(batch_keys), dtype=np.int32)
        if data is not None:
            now_in[kept], now_at[kept] = index.number(data.file_path), np.arange(images.num_rows)
        index.assign_hashed(a, b, now_in, now_at)
        self.counts.added(data, deletes.num_rows > 0, self.policy)
