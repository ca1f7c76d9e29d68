"""What a table looks like right now, read from its Iceberg metadata tables.

The numbers maintenance decides on: data files per size tier in the worst partition, delete
files, manifests, snapshots, and when each writer's progress marker was last committed
(snapshots carrying one must outlive expiry, or a restarted writer would lose its place).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pyiceberg.table import TableProperties

from pipeline.aggregates.rollups import PROGRESS_PROPERTY
from pipeline.kafka_source.offsets import OFFSETS_PROPERTY

PROGRESS_MARKERS = (OFFSETS_PROPERTY, PROGRESS_PROPERTY)
#: Iceberg's table property for the age of the snapshots expiry keeps
MAX_SNAPSHOT_AGE_PROPERTY = TableProperties.MAX_SNAPSHOT_AGE_MS


@dataclass(frozen=True)
class ReadPosition:
    """Where an incremental reader stands in a table, as commit times (epoch ms)."""

    position_ms: int  # the table's snapshot the reader read up to (or the table's first, for a reader from the start)
    moved_ms: int  # the reader's own newest commit


@dataclass(frozen=True)
class TableHealth:
    table: str
    data_files: int
    #: data files in each size tier (``MaintenanceSettings.tier_bounds``; tier 0: the small files), each
    #: the most any one partition holds
    tier_files_worst_partition: tuple[int, ...]
    delete_files: int
    manifests: int
    snapshots: int
    oldest_snapshot_ms: int | None
    #: commit time (epoch ms) of the newest current-lineage snapshot carrying each progress marker
    markers: dict[str, int] = field(default_factory=dict)
    #: each incremental reader of the table (``LakeTable.reads``): the commit time (epoch ms) of the table's snapshot
    #: it stands on, and of its own newest commit (when it last moved)
    read_positions: dict[str, ReadPosition] = field(default_factory=dict)
    partitioned: bool = True
    #: the table's own ``history.expire.max-snapshot-age-ms``, if it declares one
    max_snapshot_age_ms: int | None = None

    @property
    def small_files_worst_partition(self) -> int:
        return self.tier_files_worst_partition[0]


def read_health(spark, table: str, tier_bounds: tuple[int, ...], readers: tuple[str, ...] = ()) -> TableHealth:
    """One pass over ``table``'s metadata tables (no data files are read).

    ``readers``: the tables whose writers read ``table``'s snapshots incrementally (``LakeTable.reads``); the
    snapshot each stands on is in ``read_positions``, so that expiry can keep it and every snapshot after it.

    Tier 0 holds the files under ``tier_bounds[0]``, tier k those from ``tier_bounds[k-1]`` up
    to ``tier_bounds[k]``; files above the last bound are final and not counted.
    """
    partitioned = "partition" in spark.table(f"{table}.data_files").columns
    grouping = " GROUP BY partition" if partitioned else ""
    size = "file_size_in_bytes"
    lower = (0, *tier_bounds[:-1])
    per_partition = ", ".join(f"count_if({size} >= {int(lo)} AND {size} < {int(hi)}) AS t{k}"
                              for k, (lo, hi) in enumerate(zip(lower, tier_bounds)))
    worst = ", ".join(f"coalesce(max(t{k}), 0) AS t{k}" for k in range(len(tier_bounds)))
    tiers = spark.sql(f"SELECT {worst} FROM (SELECT {per_partition} FROM {table}.data_files{grouping})").first()
    counts = spark.sql(
        f"SELECT (SELECT count(*) FROM {table}.data_files) AS data_files, "
        f"(SELECT count(*) FROM {table}.delete_files) AS delete_files, "
        f"(SELECT count(*) FROM {table}.manifests) AS manifests, "
        f"(SELECT count(*) FROM {table}.snapshots) AS snapshots, "
        f"(SELECT unix_millis(min(committed_at)) FROM {table}.snapshots) AS oldest").first()
    markers = {}
    for key in PROGRESS_MARKERS:
        row = spark.sql(
            f"SELECT unix_millis(max(s.committed_at)) AS at FROM {table}.snapshots s JOIN {table}.history h "
            f"ON s.snapshot_id = h.snapshot_id WHERE h.is_current_ancestor AND s.summary['{key}'] IS NOT NULL").first()
        if row.at is not None:
            markers[key] = row.at
    read_positions = {reader: at for reader in readers if (at := _read_up_to(spark, table, reader)) is not None}
    properties = {r.key: r.value for r in spark.sql(f"SHOW TBLPROPERTIES {table}").collect()}
    age = properties.get(MAX_SNAPSHOT_AGE_PROPERTY)
    return TableHealth(table=table, data_files=counts.data_files, tier_files_worst_partition=tuple(tiers),
                       delete_files=counts.delete_files, manifests=counts.manifests, snapshots=counts.snapshots,
                       oldest_snapshot_ms=counts.oldest, markers=markers, read_positions=read_positions, partitioned=partitioned,
                       max_snapshot_age_ms=int(age) if age else None)


def _read_up_to(spark, table: str, reader: str) -> ReadPosition | None:
    """Where ``reader``'s newest position stands in ``table``, if the snapshot it needs is still there.

    A reader from the start (position 0) needs the table's first snapshot: its lineage is read from there.
    """
    if not spark.catalog.tableExists(reader):
        return None
    row = spark.sql(
        f"SELECT s.summary['{PROGRESS_PROPERTY}'] AS position, unix_millis(s.committed_at) AS moved "
        f"FROM {reader}.snapshots s JOIN {reader}.history h ON s.snapshot_id = h.snapshot_id "
        f"WHERE h.is_current_ancestor AND s.summary['{PROGRESS_PROPERTY}'] IS NOT NULL "
        "ORDER BY s.committed_at DESC LIMIT 1").first()
    if row is None or row.position is None:
        return None
    position = int(row.position)
    where = "parent_id IS NULL" if position <= 0 else f"snapshot_id = {position}"
    found = spark.sql(f"SELECT unix_millis(min(committed_at)) AS at FROM {table}.snapshots WHERE {where}").first()
    return None if found is None or found.at is None else ReadPosition(found.at, row.moved)
