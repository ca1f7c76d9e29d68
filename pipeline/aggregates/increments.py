"""The click rows committed after a snapshot of the click table, read from the files each append added.

Iceberg's snapshot log says what changed: an ``append`` snapshot's manifests list the data
files it added, and those files hold exactly its new rows. Compaction's ``replace``
snapshots add no rows (their files hold rows counted already) and are passed over; a
``delete`` or ``overwrite`` (a row-level fix by hand) is passed over too and reported,
since the totals cannot take a row back. Reading the added files directly costs a listing
of the new manifests and the new files themselves: no scan planning over the whole table.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc
from pyiceberg.expressions import AlwaysTrue
from pyiceberg.io.pyarrow import ArrowScan
from pyiceberg.manifest import DataFile, ManifestContent, ManifestEntryStatus
from pyiceberg.table import FileScanTask
from pyiceberg.table.snapshots import Operation, Snapshot, ancestors_of

from lakehouse.errors import LakehouseError

#: the position of a result table that has read the click table from its first snapshot
FROM_THE_START = 0


class PositionLostError(LakehouseError):
    """The snapshot a result table stands on is no longer in the click table's lineage (expired)."""


@dataclass
class Increment:
    snapshot_id: int  # the newest snapshot read: the new position
    rows: pa.Table
    skipped: list[str] = field(default_factory=list)  # the row-changing snapshots passed over

    @property
    def through_ms(self) -> int | None:
        """The newest ``ingest_time`` read, epoch ms (None without rows)."""
        return newest_ingest_ms(self.rows)


def newest_ingest_ms(rows: pa.Table) -> int | None:
    """The newest ``ingest_time`` of click ``rows``, epoch ms (None without rows)."""
    if rows.num_rows == 0:
        return None
    newest = pc.max(rows.column("ingest_time")).as_py()
    return int(newest.timestamp() * 1000) if newest is not None else None


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


def read_files(table, files: list[DataFile], columns: tuple[str, ...]) -> pa.Table:
    """``columns`` of the rows in ``files``, as the table's current schema names and types them."""
    schema = table.schema().select(*columns)
    if not files:
        return schema.as_arrow().empty_table()
    scan = ArrowScan(table.metadata, table.io, schema, AlwaysTrue())
    return scan.to_table([FileScanTask(f) for f in files])


def read_increment(table, snapshots: list[Snapshot], columns: tuple[str, ...]) -> Increment:
    """The rows the appends among ``snapshots`` added (``snapshots`` must not be empty)."""
    files, skipped = [], []
    for snapshot in snapshots:
        operation = snapshot.summary.operation if snapshot.summary else Operation.APPEND
        if operation == Operation.APPEND:
            files += added_files(table, snapshot)
        elif operation in (Operation.DELETE, Operation.OVERWRITE):
            skipped.append(f"{operation.value} snapshot {snapshot.snapshot_id}")
    return Increment(snapshots[-1].snapshot_id, read_files(table, files, columns), skipped)
