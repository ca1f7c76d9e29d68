"""Progress markers kept in Iceberg snapshot summaries, committed atomically with the data.

Every writer of the lakehouse records how far it got in the same commit as its rows:
Kafka offsets for the ingestion jobs, the streaming epoch and batch id for the live
aggregates. Snapshots written by others (compaction, expiry) carry no marker, so the
newest *ancestor of the current snapshot* that has one is the truth.
"""

from __future__ import annotations


def latest_property(spark, table: str, key: str) -> str | None:
    """Value of ``key`` in the newest snapshot of the current lineage that recorded it."""
    return latest_properties(spark, table, key)[key]


def latest_properties(spark, table: str, key: str, *others: str) -> dict[str, str | None]:
    """``key`` and ``others`` as recorded together by the newest snapshot of the current lineage
    that has ``key`` (markers written in one commit are read from that one commit)."""
    wanted = (key, *others)
    rows = spark.sql(
        f"""
        SELECT {", ".join(f"s.summary['{k}'] AS `{k}`" for k in wanted)}
        FROM {table}.snapshots s JOIN {table}.history h ON s.snapshot_id = h.snapshot_id
        WHERE h.is_current_ancestor AND s.summary['{key}'] IS NOT NULL
        ORDER BY h.made_current_at DESC
        LIMIT 1
        """
    ).collect()
    return {k: (rows[0][k] if rows else None) for k in wanted}
