"""Kafka offsets stored in Iceberg snapshot summaries: the pipeline's only checkpoint.

Each commit of a sink table carries ``lakehouse.kafka-offsets`` = the next offset to
read per topic and partition. Because the offsets and the rows are one atomic Iceberg
commit, the table itself says exactly how far it has consumed. Snapshots written by
others (compaction, expiry) carry no offsets, so the newest ancestor that has them wins.
"""

from __future__ import annotations

import json

OFFSETS_PROPERTY = "lakehouse.kafka-offsets"


def encode(offsets: dict[str, dict[int, int]]) -> str:
    return json.dumps({t: {str(p): o for p, o in sorted(parts.items())} for t, parts in sorted(offsets.items())},
                      separators=(",", ":"))


def decode(text: str | None) -> dict[str, dict[int, int]]:
    if not text:
        return {}
    return {t: {int(p): int(o) for p, o in parts.items()} for t, parts in json.loads(text).items()}


def write_options(offsets: dict[str, dict[int, int]]) -> dict[str, str]:
    """DataFrameWriterV2 options that put the offsets into the commit's snapshot summary."""
    return {f"snapshot-property.{OFFSETS_PROPERTY}": encode(offsets)}


def committed_offsets(spark, table: str) -> dict[str, dict[int, int]]:
    """Offsets of the newest snapshot in the table's current lineage that recorded them."""
    rows = spark.sql(
        f"""
        SELECT s.summary['{OFFSETS_PROPERTY}'] AS offsets
        FROM {table}.snapshots s JOIN {table}.history h ON s.snapshot_id = h.snapshot_id
        WHERE h.is_current_ancestor AND s.summary['{OFFSETS_PROPERTY}'] IS NOT NULL
        ORDER BY h.made_current_at DESC
        LIMIT 1
        """
    ).collect()
    return decode(rows[0].offsets) if rows else {}
