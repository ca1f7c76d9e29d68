"""Reading a dimension table's file list and where each live key is, for the merge-on-read writer.

Read once when the writer starts (and after a commit lost a race): the key column of every
live data file, minus the positions its delete files name. This is the one step whose cost
follows the table's size (docs/cdc.md).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from pyiceberg.manifest import DataFile, DataFileContent, ManifestEntry

from lakehouse.errors import FatalError
from pipeline.lake_writer.key_index import KeyIndex, key_hashes


def live_files(table) -> list[ManifestEntry]:
    """Every live entry (data and delete files) of the table's current snapshot."""
    current = table.current_snapshot()
    return [entry
            for manifest in (current.manifests(table.io) if current else ())
            for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=True)]


def _field_id(field: pa.Field) -> int | None:
    raw = (field.metadata or {}).get(b"PARQUET:field_id")
    return int(raw) if raw is not None else None


def read_by_field_id(io, path: str, schema: pa.Schema) -> pa.Table:
    """The columns of ``schema`` (Iceberg's Arrow schema, with field ids) from one data file, found by field id.

    By id, not by name: a file written before a column was added lacks it (it reads null), and one
    written before a rename has it under its old name.
    """
    with io.new_input(path).open() as stream:
        parquet = pq.ParquetFile(stream)
        in_file = {_field_id(f): f.name for f in parquet.schema_arrow}
        wanted = [in_file[i] for i in (_field_id(f) for f in schema) if i in in_file]
        rows = parquet.read(columns=wanted)
    columns = []
    for field in schema:
        name = in_file.get(_field_id(field))
        columns.append(rows.column(name).cast(field.type) if name is not None else pa.nulls(rows.num_rows, field.type))
    return pa.Table.from_arrays(columns, schema=schema)


def read_index(table, key: str) -> KeyIndex:
    """A ``KeyIndex`` of the table's current snapshot."""
    tasks = [(task.file, list(task.delete_files)) for task in table.scan(selected_fields=(key,)).plan_files()]
    return index_of_files(table.io, table.schema().as_arrow().field(key), tasks)


def index_of_files(io, key: pa.Field, tasks: list[tuple[DataFile, list[DataFile]]]) -> KeyIndex:
    """A ``KeyIndex`` of the live rows of ``tasks``: each data file with the delete files that apply to it.

    ``key``: the key column as the table's Arrow schema has it (with its field id).
    """
    deleted: dict[str, np.ndarray] = {}
    for delete_file in {d.file_path: d for _, deletes in tasks for d in deletes}.values():
        with io.new_input(delete_file.file_path).open() as stream:
            rows = pq.read_table(stream, columns=["file_path", "pos"])
        for path in set(rows.column("file_path").to_pylist()):
            mine = rows.filter(pa.compute.equal(rows.column("file_path"), path)).column("pos").to_numpy()
            deleted[path] = np.concatenate([deleted.get(path, np.empty(0, np.int64)), mine])
    # each file's live keys hashed as it is read, into arrays sized once: the 10 M keys as strings, then their
    # hashes, then sorted copies were the apply's peak memory at start (~1.2 GB; this way the index's 240 MB + ~160)
    capacity = sum(file.record_count for file, _ in tasks)
    a, b = np.empty(capacity, np.uint64), np.empty(capacity, np.uint64)
    numbers, positions = np.empty(capacity, np.int32), np.empty(capacity, np.int32)
    files: list[str] = []
    filled = 0
    for file, _ in tasks:
        path = file.file_path
        column = read_by_field_id(io, path, pa.schema([key])).column(0).combine_chunks()
        if len(column) != file.record_count:
            raise FatalError(f"{path} holds {len(column):,} rows where the table's metadata says "
                             f"{file.record_count:,}: the table is damaged; restore it or snapshot the source again")
        live = np.ones(len(column), dtype=bool)
        if path in deleted:
            live[deleted[path][deleted[path] < len(column)]] = False
        where = np.flatnonzero(live)
        end = filled + len(where)
        if len(where):
            a[filled:end], b[filled:end] = key_hashes(column.take(pa.array(where)).cast(pa.large_string()))
        numbers[filled:end], positions[filled:end] = len(files), where
        files.append(path)
        filled = end
    return KeyIndex(a[:filled], b[:filled], numbers[:filled], positions[:filled], files)


@dataclass
class FileCounts:
    """The delete files the table holds, and the batches written since the last fold: when the next one is due.

    Due after ``policy.fold_files`` batches. Counting files instead (an earlier version) folded
    again two batches after each fold once most data files carried a file-scoped delete file: a
    fold leaves one per data file with deleted rows, ~22 on the 10 M-row table, so the count of
    delete files stood near the limit for good.
    """

    small_data: int
    deletes: int
    since_fold: int = 0

    @classmethod
    def of(cls, entries: Iterable[ManifestEntry], policy) -> FileCounts:
        return cls.of_files([e.data_file for e in entries], policy)

    @classmethod
    def of_files(cls, files: list[DataFile], policy) -> FileCounts:
        return cls(sum(1 for f in files if f.content == DataFileContent.DATA and f.record_count < policy.small_rows),
                   sum(1 for f in files if f.content != DataFileContent.DATA))

    def added(self, data: DataFile | None, deletes: bool, policy) -> None:
        self.small_data += int(data is not None and data.record_count < policy.small_rows)
        self.deletes += int(deletes)
        self.since_fold += int(data is not None or deletes)

    def due(self, policy) -> bool:
        return self.since_fold >= policy.fold_files
