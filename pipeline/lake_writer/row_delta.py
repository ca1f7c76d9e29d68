"""Merge-on-read commits through PyIceberg: data files and position-delete files in one snapshot.

PyIceberg 0.12 writes data files and copy-on-write deletes only; the dimension writer needs
Iceberg's *row delta* (Java's ``RowDelta``): the batch's after-images as a new data file and
a position-delete file naming the rows they replace, committed together with the Kafka
offsets. The pieces here are small and follow the spec (v2): a position-delete file is a
Parquet file of ``file_path`` (field id 2147483546) and ``pos`` (2147483545) sorted by both,
listed in a manifest whose content is ``deletes``; its ``file_path`` bounds let readers skip
it for data files outside them. Every reader in the project (Spark, Trino, DuckDB,
PyIceberg) reads position deletes.

``RowDelta`` either appends (the parent's manifests carry on; a batch) or, with
``rewrite=True``, writes the table's whole file list into one data and one delete manifest
(a fold: files out, files in, metadata back to two manifests).
"""

from __future__ import annotations

import copyreg
import uuid
from collections.abc import Iterable

import pyarrow as pa
import pyarrow.parquet as pq
from pyiceberg.exceptions import CommitFailedException
from pyiceberg.io.pyarrow import write_file
from pyiceberg.manifest import (
    DataFile,
    DataFileContent,
    FileFormat,
    ManifestContent,
    ManifestEntry,
    ManifestEntryStatus,
    ManifestFile,
    ManifestWriterV2,
)
from pyiceberg.partitioning import PartitionFieldValue, PartitionKey
from pyiceberg.table import WriteTask
from pyiceberg.table.snapshots import Operation, Summary
from pyiceberg.typedef import EMPTY_DICT, Record

from pipeline.lake_writer.pyiceberg_internals import FastAppendFiles

PATH_ID, POS_ID = 2147483546, 2147483545
POSITION_DELETE_SCHEMA = pa.schema([
    pa.field("file_path", pa.string(), nullable=False, metadata={b"PARQUET:field_id": str(PATH_ID).encode()}),
    pa.field("pos", pa.int64(), nullable=False, metadata={b"PARQUET:field_id": str(POS_ID).encode()}),
])


def write_data_file(table_metadata, io, rows: pa.Table, bucket: int | None = None) -> DataFile:
    """``rows`` as one data file, in the order given (the key index records row positions).

    ``bucket``: the key bucket the rows belong to, in a table partitioned by ``bucket(N, key)``
    (``pipeline.cdc.buckets``); its partition value and path.
    """
    task = WriteTask(write_uuid=uuid.uuid4(), task_id=0, schema=table_metadata.schema(),
                     record_batches=rows.to_batches(), partition_key=_partition_key(table_metadata, bucket))
    written = next(iter(write_file(io, table_metadata, iter([task]))))
    written.spec_id = table_metadata.default_spec_id  # from_args drops it: it is not a field of the record
    return written


def _partition_key(table_metadata, bucket: int | None) -> PartitionKey | None:
    if bucket is None:
        return None
    spec = table_metadata.spec()
    return PartitionKey([PartitionFieldValue(spec.fields[0], bucket)], spec, table_metadata.schema())


def write_position_deletes(table_metadata, io, location_provider, deletes: pa.Table,
                           bucket: int | None = None) -> DataFile:
    """One position-delete file of (file_path, pos) rows, sorted as the spec asks, with path bounds.

    ``bucket``: the key bucket of the data files it names (a delete file applies only to data files of its
    own partition)."""
    deletes = deletes.cast(POSITION_DELETE_SCHEMA).sort_by([("file_path", "ascending"), ("pos", "ascending")])
    partition_key = _partition_key(table_metadata, bucket)
    path = location_provider.new_data_location(f"{uuid.uuid4()}-deletes.parquet", partition_key)
    with io.new_output(path).create(overwrite=True) as stream:
        pq.write_table(deletes, stream, compression="zstd")
        size = stream.tell()  # what was written: no request to the store to ask
    paths, positions = deletes.column("file_path"), deletes.column("pos")
    written = DataFile.from_args(
        content=DataFileContent.POSITION_DELETES, file_path=path, file_format=FileFormat.PARQUET,
        partition=partition_key.partition if partition_key else Record(), record_count=deletes.num_rows, file_size_in_bytes=size,
        lower_bounds={PATH_ID: paths[0].as_py().encode(), POS_ID: _long(min(positions.to_pylist()))},
        upper_bounds={PATH_ID: paths[-1].as_py().encode(), POS_ID: _long(max(positions.to_pylist()))})
    written.spec_id = table_metadata.default_spec_id
    return written


def _long(value: int) -> bytes:
    return int(value).to_bytes(8, "little", signed=True)


def _data_file(fields: list, spec_id: int | None) -> DataFile:
    file = DataFile(*fields)
    if spec_id is not None:
        file.spec_id = spec_id
    return file


# A DataFile crosses processes (Spark tasks write the files, the driver commits them): pickled as a plain Record
# it would lose its partition spec id, which PyIceberg keeps beside the record's fields.
copyreg.pickle(DataFile, lambda f: (_data_file, (list(f._data), getattr(f, "_spec_id", None))))


class _DeleteManifestWriter(ManifestWriterV2):
    def content(self) -> ManifestContent:
        return ManifestContent.DELETES

    @property
    def _meta(self) -> dict[str, str]:
        return {**super()._meta, "content": "deletes"}


class RowDelta(FastAppendFiles):
    """One snapshot adding data and delete files (and, rewriting the manifests, removing some)."""

    def __init__(self, transaction, io, snapshot_properties: dict[str, str], rewrite: bool = False,
                 same_rows: bool = False):
        """``rewrite``: write every live file into new manifests (files may be removed); ``same_rows``: the
        snapshot changes no row (a fold), so it is a ``replace``."""
        super().__init__(Operation.OVERWRITE, transaction, io,
                         snapshot_properties=snapshot_properties)
        self.rewrite, self.same_rows = rewrite, same_rows
        self._removed: set[str] = set()

    def _validate_concurrency(self) -> None:
        """Refuse PyIceberg's retry on a table another writer changed: the positions must be found again.

        PyIceberg 0.12 retries a failed commit by building the same snapshot on the new head. For
        an append that is right; for position deletes it is not: a compaction that rewrote the
        files they name would leave them pointing at files no longer live, and the old rows
        would come back in the compacted ones (a test does exactly this). Failing here sends
        the writer back to reload where every key is, and apply the batch again.
        """
        head = self._current_branch_head_id()
        if head != self._starting_snapshot_id:
            raise CommitFailedException(f"the table moved from snapshot {self._starting_snapshot_id} to {head} "
                                        "under a row delta; its positions are read again")

    def add(self, file: DataFile) -> RowDelta:
        self.append_data_file(file)  # the summary counts data and delete files by their content
        return self

    def remove(self, file: DataFile) -> RowDelta:
        if not self.rewrite:
            raise ValueError("removing files rewrites the manifests: RowDelta(..., rewrite=True)")
        self.delete_data_file(file)
        self._removed.add(file.file_path)
        return self

    def _summary(self, snapshot_properties: dict[str, str] = EMPTY_DICT) -> Summary:
        """A fold is a ``replace`` (the same rows in other files), as Iceberg-Java names it: incremental
        readers skip it. PyIceberg 0.12 totals only append/overwrite/delete, so it is totalled as an
        overwrite and then named."""
        summary = super()._summary(snapshot_properties)
        if not self.same_rows:
            return summary
        return Summary(Operation.REPLACE, **summary.additional_properties)

    def _manifests(self) -> list[ManifestFile]:
        added = [f for f in self._added_data_files if f.content == DataFileContent.DATA]
        added_deletes = [f for f in self._added_data_files if f.content != DataFileContent.DATA]
        existing: list[ManifestFile] = [] if self.rewrite else self._existing_manifests()
        kept: dict[ManifestContent, list[ManifestEntry]] = {ManifestContent.DATA: [], ManifestContent.DELETES: []}
        gone: dict[ManifestContent, list[ManifestEntry]] = {ManifestContent.DATA: [], ManifestContent.DELETES: []}
        if self.rewrite and self._parent_snapshot_id is not None:
            parent = self._transaction.table_metadata.snapshot_by_id(self._parent_snapshot_id)
            for manifest in parent.manifests(io=self._io) if parent else ():
                for entry in manifest.fetch_manifest_entry(io=self._io, discard_deleted=True):
                    side = gone if entry.data_file.file_path in self._removed else kept
                    side[manifest.content].append(entry)
            found = {e.data_file.file_path for entries in gone.values() for e in entries}
            if found != self._removed:  # another writer replaced it: removing nothing would double its rows
                raise CommitFailedException(f"{len(self._removed - found)} of the files this commit removes are no "
                                            "longer in the table; it is planned again from the new head")
        return existing + self._write(ManifestContent.DATA, added, kept[ManifestContent.DATA],
                                      gone[ManifestContent.DATA]) \
            + self._write(ManifestContent.DELETES, added_deletes, kept[ManifestContent.DELETES],
                          gone[ManifestContent.DELETES])

    def _write(self, content: ManifestContent, added: Iterable[DataFile], kept: list[ManifestEntry],
               gone: list[ManifestEntry]) -> list[ManifestFile]:
        added = list(added)
        if not (added or kept or gone):
            return []
        spec = self._transaction.table_metadata.spec()
        kind = ManifestWriterV2 if content == ManifestContent.DATA else _DeleteManifestWriter
        with kind(spec, self.schema(), self.new_manifest_output(), self._snapshot_id, self._compression) as writer:
            for file in added:
                writer.add_entry(ManifestEntry.from_args(status=ManifestEntryStatus.ADDED, snapshot_id=self._snapshot_id,
                                                         sequence_number=None, file_sequence_number=None,
                                                         data_file=file))
            for entry in kept:
                writer.existing(entry)
            for entry in gone:
                writer.delete(entry)
        return [writer.to_manifest_file()]
