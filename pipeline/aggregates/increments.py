"""Which click rows a live-aggregates batch reads: the appends after its position, planned from metadata.

Iceberg's snapshot log says what changed: an ``append`` snapshot's manifests list the data
files it added, and those files hold exactly its new rows. Compaction's ``replace``
snapshots add no rows (their files hold rows counted already) and are passed over; a
``delete`` or ``overwrite`` (a row-level fix by hand) is passed over too and reported,
since the totals cannot take a row back. Iceberg's incremental scan reads the same rows in
Spark (appends only); the driver needs the new manifests alone, for the batch's row count and
its newest ``ingest_time`` (the files' column statistics), never the rows.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pyiceberg.conversions import from_bytes
from pyiceberg.manifest import DataFile, ManifestContent, ManifestEntryStatus
from pyiceberg.table.snapshots import Operation, Snapshot, ancestors_of

from lakehouse.errors import LakehouseError

#: the position of a result table that has read the click table from its first snapshot
FROM_THE_START = 0


class PositionLostError(LakehouseError):
    """The snapshot a result table stands on is no longer in the click table's lineage (expired)."""


@dataclass(frozen=True)
class Increment:
    """The click rows a batch reads: the appends after ``start`` up to ``end``, planned from metadata."""

    start: int  # the position read from (exclusive): a snapshot id, or FROM_THE_START
    end: int  # the newest snapshot read: the new position
    rows: int  # rows the appends added (their files' record counts)
    through_ms: int | None  # the newest ``ingest_time`` they hold, epoch ms (the files' upper bounds)
    skipped: list[str] = field(default_factory=list)  # the row-changing snapshots passed over


def snapshots_after(table, position: int, limit: int) -> list[Snapshot]:
    """Up to ``limit`` snapshots of the current lineage after ``position``, oldest first."""
    current = table.current_snapshot()
    if current is None:
        return []
    chain: list[Snapshot] = []
    for snapshot in ancestors_of(current, table.metadata):
        if snapshot.snapshot_id == position:
            return chain[::-1][:limit]
        chain.append(snapshot)
    if position == FROM_THE_START and chain[-1].parent_snapshot_id is None:
        return chain[::-1][:limit]
    raise PositionLostError(f"snapshot {position} of {table.name()[-1]} is no longer in its history "
                            "(expired by maintenance, or the table was replaced)")


def position_before(table, since_ms: int) -> int:
    """The position of a reader of the snapshots committed at or after ``since_ms``."""
    current = table.current_snapshot()
    oldest = None
    for snapshot in ancestors_of(current, table.metadata) if current else ():
        if snapshot.timestamp_ms < since_ms:
            return snapshot.snapshot_id
        oldest = snapshot
    if oldest is not None and oldest.parent_snapshot_id is not None:
        raise PositionLostError(f"the click table's history starts after {since_ms} (older snapshots expired): "
                                "clicks committed before its oldest snapshot cannot be told apart")
    return FROM_THE_START


def added_files(table, snapshot: Snapshot) -> list[DataFile]:
    """The data files ``snapshot`` added."""
    files = []
    for manifest in snapshot.manifests(table.io):
        if manifest.content != ManifestContent.DATA or manifest.added_snapshot_id != snapshot.snapshot_id:
            continue
        for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=True):
            if entry.status == ManifestEntryStatus.ADDED and entry.snapshot_id == snapshot.snapshot_id:
                files.append(entry.data_file)
    return files


def newest_ingest_ms_of(table, files: list[DataFile]) -> int | None:
    """The newest ``ingest_time`` in ``files``, epoch ms, from their column statistics (None if none say)."""
    field = table.schema().find_field("ingest_time")
    bounds = [f.upper_bounds.get(field.field_id) for f in files if f.upper_bounds]
    newest = max((from_bytes(field.field_type, b) for b in bounds if b is not None), default=None)
    return int(newest) // 1000 if newest is not None else None  # timestamps are stored as microseconds


def plan_increment(table, position: int, snapshots: list[Snapshot]) -> Increment:
    """What a batch reads after ``position``: the appends among ``snapshots`` (must not be empty)."""
    files, skipped = [], []
    for snapshot in snapshots:
        operation = snapshot.summary.operation if snapshot.summary else Operation.APPEND
        if operation == Operation.APPEND:
            files += added_files(table, snapshot)
        elif operation in (Operation.DELETE, Operation.OVERWRITE):
            skipped.append(f"{operation.value} snapshot {snapshot.snapshot_id}")
    return Increment(position, snapshots[-1].snapshot_id, sum(f.record_count for f in files),
                     newest_ingest_ms_of(table, files), skipped)
