"""Kafka offsets stored in Iceberg snapshot summaries: the pipeline's only checkpoint.

Each commit of a sink table carries ``lakehouse.kafka-offsets`` = the next offset to
read per topic and partition. Because the offsets and the rows are one atomic Iceberg
commit, the table itself says exactly how far it has consumed. Snapshots written by
others (compaction, expiry) carry no offsets, so the newest ancestor that has them wins.

Offsets mean something only within one life of a topic: a topic deleted and created
again (or every topic of a broker whose log folder was wiped) is a new log that starts
at offset 0. So the same commit also records each topic's id
(``lakehouse.kafka-topic-ids``, Kafka's topic UUID), and the planner reads a topic whose
id changed from its start instead of taking the old offsets as a position in it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field

from pipeline.kafka_source.ranges import Offsets as Offsets  # defined beside the ranges; callers know it from here
from pipeline.snapshot_properties import latest_properties

OFFSETS_PROPERTY = "lakehouse.kafka-offsets"
TOPIC_IDS_PROPERTY = "lakehouse.kafka-topic-ids"

@dataclass(frozen=True)
class Position:
    """Where a table stands in Kafka: offsets, and the ids of the topics they belong to."""

    offsets: Offsets = field(default_factory=dict)
    topic_ids: dict[str, str] = field(default_factory=dict)  # empty for tables committed before ids were kept


def encode(offsets: Offsets) -> str:
    return json.dumps({t: {str(p): o for p, o in sorted(parts.items())} for t, parts in sorted(offsets.items())},
                      separators=(",", ":"))


def decode(text: str | None) -> Offsets:
    if not text:
        return {}
    return {t: {int(p): int(o) for p, o in parts.items()} for t, parts in json.loads(text).items()}


def in_current_log(offsets: Offsets, committed_ids: dict[str, str], current_ids: dict[str, str]) -> Offsets:
    """The offsets of topics still in the life they were committed in (an unknown id counts as the same)."""
    return {topic: parts for topic, parts in offsets.items()
            if committed_ids.get(topic, current_ids.get(topic)) == current_ids.get(topic)}


def commit_properties(offsets: Offsets, topic_ids: dict[str, str]) -> dict[str, str]:
    """The snapshot-summary entries a commit consuming up to ``offsets`` carries."""
    ids = {t: topic_ids[t] for t in sorted(offsets) if t in topic_ids}
    return {OFFSETS_PROPERTY: encode(offsets), TOPIC_IDS_PROPERTY: json.dumps(ids, separators=(",", ":"))}


def position_of(summary: Mapping[str, str | None]) -> Position:
    """The position a snapshot summary (or the properties read from one) records; empty if none."""
    ids = summary.get(TOPIC_IDS_PROPERTY)
    return Position(decode(summary.get(OFFSETS_PROPERTY)), json.loads(ids) if ids else {})


def committed_position(spark, table: str) -> Position:
    """The position recorded by the newest snapshot in the table's current lineage that has one."""
    return position_of(latest_properties(spark, table, OFFSETS_PROPERTY, TOPIC_IDS_PROPERTY))


def committed_offsets(spark, table: str) -> Offsets:
    """Offsets of the newest snapshot in the table's current lineage that recorded them."""
    return committed_position(spark, table).offsets
