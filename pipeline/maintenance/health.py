"""What a table looks like right now, read from its Iceberg metadata tables.

The numbers maintenance decides on: small and medium data files in the worst partition, delete
files, manifests, snapshots, and when each writer's progress marker was last committed
(snapshots carrying one must outlive expiry, or a restarted writer would lose its place).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pipeline.aggregates.rollups import PROGRESS_PROPERTY
from pipeline.kafka_source.offsets import OFFSETS_PROPERTY

PROGRESS_MARKERS = (OFFSETS_PROPERTY, PROGRESS_PROPERTY)


@dataclass(frozen=True)
class TableHealth:
    table: str
    data_files: int
    small_files_worst_partition: int
    #: files neither small nor near the target size (what compacting small files produces), worst partition
    medium_files_worst_partition: int
    delete_files: int
    manifests: int
    snapshots: int
    oldest_snapshot_ms: int | None
    #: commit time (epoch ms) of the newest current-lineage snapshot carrying each progress marker
    markers: dict[str, int] = field(default_factory=dict)
    partitioned: bool = True


def read_health(spark, table: str, small_file_bytes: int, medium_file_bytes: int) -> TableHealth:
    """One pass over ``table``'s metadata tables (no data files are read).

    Small files are under ``small_file_bytes``; medium ones from there to ``medium_file_bytes``.
    """
    partitioned = "partition" in spark.table(f"{table}.data_files").columns
    grouping = " GROUP BY partition" if partitioned else ""
    size = "file_size_in_bytes"
    sizes = spark.sql(
        f"SELECT coalesce(max(small), 0) AS small, coalesce(max(medium), 0) AS medium FROM ("
        f"SELECT count_if({size} < {int(small_file_bytes)}) AS small, "
        f"count_if({size} >= {int(small_file_bytes)} AND {size} < {int(medium_file_bytes)}) AS medium "
        f"FROM {table}.data_files{grouping})").first()
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
    return TableHealth(table=table, data_files=counts.data_files, small_files_worst_partition=sizes.small,
                       medium_files_worst_partition=sizes.medium,
                       delete_files=counts.delete_files, manifests=counts.manifests, snapshots=counts.snapshots,
                       oldest_snapshot_ms=counts.oldest, markers=markers, partitioned=partitioned)
