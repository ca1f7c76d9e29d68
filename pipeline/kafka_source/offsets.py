"""Kafka offsets stored in Iceberg snapshot summaries: the pipeline's only checkpoint.

Each commit of a sink table carries ``lakehouse.kafka-offsets`` = the next offset to
read per topic and partition. Because the offsets and the rows are one atomic Iceberg
commit, the table itself says exactly how far it has consumed. Snapshots written by
others (compaction, expiry) carry no offsets, so the newest ancestor that has them wins.
"""

from __future__ import annotations

import json

from pipeline.snapshot_properties import latest_property

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
    return decode(latest_property(spark, table, OFFSETS_PROPERTY))
