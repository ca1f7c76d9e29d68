"""A dimension table cut into key buckets: each bucket's files, key index and folds belong to one Spark task.

The table is partitioned by Iceberg's own ``bucket(N, key)`` transform, so every data file and
every position-delete file holds the rows of one bucket only. That makes the apply's per-key
work split cleanly over Spark tasks (``pipeline.cdc.apply``): bucket *i*'s task alone
knows where bucket *i*'s keys live (its ``KeyIndex``: 24 bytes a key), writes the batch's
after-images of those keys into one data file of partition *i*, names the rows they replace
in one position-delete file of partition *i*, and folds partition *i*'s small files and delete
files when they have gathered. No task ever reads or moves another bucket's rows, so nothing
that one bucket does can leave another's index wrong. Readers gain too: a point query on the
key reads one partition.

A ``Bucket`` is plain data (NumPy arrays, DataFile records): between batches it stays on the
local disk of the executor that built it (``pipeline.cdc.held_state``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyiceberg.io import load_file_io
from pyiceberg.manifest import DataFile
from pyiceberg.partitioning import PartitionSpec
from pyiceberg.table.locations import load_location_provider
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.transforms import BucketTransform
from pyiceberg.types import IcebergType

from pipeline.cdc.images import after_fields, after_images, newest_per_key
from pipeline.cdc.targets import SchemaNotYetRecorded
from pipeline.lake_writer.fold import FoldPolicy, plan_fold_of, write_fold
from pipeline.lake_writer.key_index import ABSENT, KeyIndex, key_hashes
from pipeline.lake_writer.live_rows import FileCounts, index_of_files
from pipeline.lake_writer.row_delta import write_data_file, write_position_deletes
from pipeline.native_memory import give_back_freed, keep_resident_small

#: the partition field's name in every bucketed dimension table
BUCKET_FIELD = "key_bucket"


def bucket_count(spec: PartitionSpec, key_id: int) -> int | None:
    """N of the spec's ``bucket(N, key)`` field, when the spec is exactly that field; else None."""
    if len(spec.fields) == 1 and spec.fields[0].source_id == key_id \
            and isinstance(spec.fields[0].transform, BucketTransform):
        return spec.fields[0].transform.num_buckets
    return None


def buckets_of(keys: pa.Array, key_type: IcebergType, arrow_type: pa.DataType, n: int) -> np.ndarray:
    """Each key's bucket, as Iceberg's ``bucket(n)`` computes it for the key column's type.

    ``keys``: as the change envelopes carry them (text), converted to the column's type first, so a
    key lands where a reader pruning on it looks.
    """
    values = keys if keys.type == arrow_type else keys.cast(arrow_type)
    return BucketTransform(n).pyarrow_transform(key_type)(values).to_numpy(zero_copy_only=False).astype(np.int32)


@dataclass(frozen=True)
class TableWork:
    """What a bucket task needs of one table to apply a batch: fixed on the driver when the batch starts."""

    table: str
    metadata: TableMetadata  # the table as the batch starts: schema, spec, properties, location
    io_properties: dict[str, str]
    key: str  # the key column, as the lake names it
    columns: dict[str, str]  # lake column -> the after-image field it is read from
    policy: FoldPolicy
    buckets: int  # N of the table's bucket(N, key)


@dataclass
class Bucket:
    """One bucket of one table: where each of its keys lives, and its live files."""

    number: int
    index: KeyIndex
    data: dict[str, DataFile]  # path -> file, the bucket's live data files
    deletes: dict[str, DataFile]  # path -> file, its live position-delete files
    counts: FileCounts


@dataclass
class Outcome:
    """What a bucket task did to one table in one batch: the driver commits these files."""

    added: list[DataFile] = field(default_factory=list)  # the batch's data and delete files
    fold_removed: list[DataFile] = field(default_factory=list)  # a fold's files out and in: the same rows
    fold_added: list[DataFile] = field(default_factory=list)
    upserts: int = 0
    deletes: int = 0
    oldest_ms: int | None = None  # the source time of the oldest change applied
    live_keys: int = 0
    index_bytes: int = 0
    seconds: float = 0.0
    #: a fold's seconds by phase ("plan", "write", "index") and its size ("rows" rewritten, "delete files" written)
    fold: dict[str, float] = field(default_factory=dict)


def build(number: int, work: TableWork, tasks: list[tuple[DataFile, list[DataFile]]], stagger: int) -> Bucket:
    """Bucket ``number`` of a table, read from its live files (``tasks``: each data file with its deletes).

    ``stagger``: batches already counted toward this bucket's first fold, so the buckets of a table
    fold in turn rather than all in one batch.
    """
    io = load_file_io(work.io_properties, work.metadata.location)
    key_field = work.metadata.schema().as_arrow().field(work.key)
    index = index_of_files(io, key_field, tasks)
    data = {f.file_path: f for f, _ in tasks}
    deletes = {d.file_path: d for _, ds in tasks for d in ds}
    counts = FileCounts.of_files([*data.values(), *deletes.values()], work.policy)
    counts.since_fold = stagger
    return Bucket(number, index, data, deletes, counts)


def apply(bucket: Bucket, work: TableWork, changes: pa.Table | None) -> Outcome:
    """The bucket's share of a batch, in place: a fold when one is due, then the newest change per key as
    one data file and one position-delete file; returns the files to commit. (A batch that fails after this
    leaves the bucket changed but not committed: its ``Held`` version is not the one the next batch starts
    from, so the state is built again.)"""
    began = time.monotonic()
    keep_resident_small()
    outcome = Outcome()
    io = load_file_io(work.io_properties, work.metadata.location)
    locations = load_location_provider(work.metadata.location, work.metadata.properties)
    if bucket.counts.due(work.policy):
        _fold(bucket, work, io, locations, outcome)
    if changes is not None and changes.num_rows:
        _write(bucket, work, io, locations, changes, outcome)
    outcome.live_keys, outcome.index_bytes = len(bucket.index), bucket.index.nbytes
    outcome.seconds = time.monotonic() - began
    give_back_freed()  # a long-lived Python worker: what a batch's Arrow tables and arrays held goes back
    return outcome


def _write(bucket: Bucket, work: TableWork, io, locations, changes: pa.Table, outcome: Outcome) -> None:
    newest = newest_per_key(changes)
    unknown = after_fields(newest) - set(work.columns.values())
    if unknown:
        raise SchemaNotYetRecorded(f"{work.table}: changes carry {sorted(unknown)}, which the table's columns do not "
                             "name yet; applied again once the capture's schema record is read")
    schema = work.metadata.schema().as_arrow()
    images = after_images(newest, work.columns, schema)
    keys = newest.column("pk").combine_chunks()
    kept = pc.not_equal(newest.column("op").combine_chunks(), "d").to_numpy(zero_copy_only=False)
    a, b = key_hashes(keys)
    numbers, positions = bucket.index.locate_hashed(a, b)
    found = numbers != ABSENT
    if images.num_rows:
        written = write_data_file(work.metadata, io, images, bucket.number)
        outcome.added.append(written)
        bucket.data[written.file_path] = written
    if found.any():
        deletes = write_position_deletes(work.metadata, io, locations, pa.table({
            "file_path": pa.array([bucket.index.files[n] for n in numbers[found]], pa.string()),
            "pos": pa.array(positions[found], pa.int64())}), bucket.number)
        outcome.added.append(deletes)
        bucket.deletes[deletes.file_path] = deletes
    now_in = np.full(len(keys), ABSENT, dtype=np.int32)  # a deleted key: no file
    now_at = np.zeros(len(keys), dtype=np.int32)
    if images.num_rows:
        now_in[kept], now_at[kept] = bucket.index.number(written.file_path), np.arange(images.num_rows)
    bucket.index.assign_hashed(a, b, now_in, now_at)
    bucket.counts.added(written if images.num_rows else None, bool(found.any()), work.policy)
    outcome.upserts, outcome.deletes = images.num_rows, len(keys) - images.num_rows
    outcome.oldest_ms = pc.min(newest.column("source_ts_ms")).as_py()


def _fold(bucket: Bucket, work: TableWork, io, locations, outcome: Outcome) -> None:
    """The bucket's fold (``pipeline.lake_writer.fold``), in this task: its rows move, and only its index knows them."""
    began = time.monotonic()
    plan = plan_fold_of(work.metadata, [*bucket.data.values(), *bucket.deletes.values()], bucket.index, work.policy)
    bucket.counts.since_fold = 0
    if plan is None:
        return
    planned = time.monotonic()
    written = write_fold(plan, io, locations, work.key, work.policy.target_rows, bucket.number)
    wrote = time.monotonic()
    for file in plan.rewrite:
        del bucket.data[file.file_path]
    for file in plan.old_deletes:
        del bucket.deletes[file.file_path]
    for file, a, b, _, _ in written.data:
        slots = bucket.index.slots(a, b)  # every row is where the plan found it: nothing changed in between
        bucket.index.move(slots, bucket.index.number(file.file_path), np.arange(len(slots), dtype=np.int32))
        bucket.data[file.file_path] = file
    for file in written.deletes:
        bucket.deletes[file.file_path] = file
    outcome.fold_removed += [*plan.rewrite, *plan.old_deletes]
    outcome.fold_added += [f for f, *_ in written.data] + written.deletes
    bucket.counts = FileCounts.of_files([*bucket.data.values(), *bucket.deletes.values()], work.policy)
    outcome.fold = {"plan": planned - began, "write": wrote - planned, "index": time.monotonic() - wrote,
                            "rows": float(sum(f.record_count for f in plan.rewrite)),
                            "delete files": float(len(written.deletes))}

