"""Freshness per table, measured the way a reader sees it, against the product's goals.

For every row: the commit time of the Iceberg snapshot that made it visible minus the time
it happened upstream.
- clicks: the Kafka produce timestamp (``produced_at``) -> the click table's snapshot;
- dimensions: the database's ``update_time`` of the row's last change -> the dimension
  table's snapshot (rows changed since the run began; a key changed twice counts once);
- live aggregates: the click's produce timestamp -> the first commit of the result table
  whose batch read the click (each aggregate commit records the newest click batch it
  read, ``lakehouse.clicks-through``).

The file a row lives in is matched to the snapshot that added it through the ``entries``
metadata table. Entries that manifest merging carried over keep the snapshot that added
them (status 0, EXISTING), so only removed entries (status 2) are left out. Rows that
compaction rewrote would count from the compaction: measure runs without maintenance.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from lakehouse.settings import Settings
from pipeline.aggregates.rollups import THROUGH_PROPERTY

#: issue 28, goal 4: p95 seconds with the whole system running (capture, dims, clicks, aggregates)
GOALS_S = {"clicks": 5.0, "dimensions": 5.0, "aggregates": 10.0}


@dataclass(frozen=True)
class Freshness:
    name: str  # clicks, dimensions, aggregates
    tables: str  # what was measured
    p50_s: float
    p95_s: float
    p99_s: float
    rows: int  # rows measured

    @property
    def goal_s(self) -> float:
        return GOALS_S[self.name]

    @property
    def met(self) -> bool:
        return not math.isnan(self.p95_s) and self.p95_s <= self.goal_s

    def verdict(self) -> str:
        if self.rows == 0:
            return f"{self.name}: nothing measured (no rows changed in the run)"
        return (f"{self.name} ({self.tables}): p95 {self.p95_s:.1f} s over {self.rows:,} rows, goal <= "
                f"{self.goal_s:g} s: {'met' if self.met else 'NOT met'}")


def _added(table: str) -> str:
    """(file, commit ms) of every live data file of ``table``."""
    return (f"SELECT e.data_file.file_path AS file, unix_millis(s.committed_at) AS committed_ms "
            f"FROM {table}.entries e JOIN {table}.snapshots s ON e.snapshot_id = s.snapshot_id "
            f"WHERE e.status < 2")


def _quantiles(spark, name: str, tables: str, delays_sql: str) -> Freshness:
    """``delays_sql`` yields one column ``delay_ms`` per row measured."""
    row = spark.sql(f"SELECT percentile_approx(delay_ms / 1000.0, array(0.5, 0.95, 0.99), 10000) AS q, "
                    f"count(*) AS n FROM ({delays_sql})").first()
    q = [float(x) for x in row.q] if row.q else [math.nan] * 3
    return Freshness(name, tables, *q, int(row.n))


def clicks(spark, table: str, since_ms: int) -> Freshness:
    """Produce -> visible, for click rows produced since ``since_ms``."""
    return _quantiles(spark, "clicks", table, f"""
        SELECT a.committed_ms - unix_millis(r.produced_at) AS delay_ms
        FROM (SELECT input_file_name() AS file, produced_at FROM {table}
              WHERE unix_millis(produced_at) >= {since_ms}) r
        JOIN ({_added(table)}) a ON r.file = a.file""")


def dimensions(spark, settings: Settings, since_ms: int) -> Freshness:
    """Database change -> visible, for product and member rows last changed since ``since_ms``."""
    parts = []
    for table in (settings.catalog.products_table, settings.catalog.members_table):
        parts.append(f"""
            SELECT a.committed_ms - unix_millis(r.update_time) AS delay_ms
            FROM (SELECT input_file_name() AS file, update_time FROM {table}
                  WHERE unix_millis(update_time) >= {since_ms}) r
            JOIN ({_added(table)}) a ON r.file = a.file""")
    return _quantiles(spark, "dimensions", f"{settings.catalog.products_table}, {settings.catalog.members_table}",
                      " UNION ALL ".join(parts))


def aggregates(spark, settings: Settings, since_ms: int) -> Freshness:
    """Produce -> reflected in the live aggregates, for click rows produced since ``since_ms``.

    A click batch shares one ``ingest_time``; the aggregate commit that covers it is the first
    whose ``lakehouse.clicks-through`` reached that time. Measured on the product views, the
    result table the demo's questions read (the member rollup commits right after it).
    """
    clicks_table, result = settings.catalog.clicks_table, settings.catalog.product_views_table
    return _quantiles(spark, "aggregates", result, f"""
        WITH covered AS (
            SELECT CAST(summary['{THROUGH_PROPERTY}'] AS BIGINT) AS through_ms,
                   unix_millis(committed_at) AS committed_ms
            FROM {result}.snapshots WHERE summary['{THROUGH_PROPERTY}'] IS NOT NULL),
        batches AS (
            SELECT b.ingest_ms, min(c.committed_ms) AS visible_ms
            FROM (SELECT DISTINCT unix_millis(ingest_time) AS ingest_ms FROM {clicks_table}
                  WHERE unix_millis(produced_at) >= {since_ms}) b
            JOIN covered c ON c.through_ms >= b.ingest_ms GROUP BY b.ingest_ms)
        SELECT b.visible_ms - unix_millis(r.produced_at) AS delay_ms
        FROM {clicks_table} r JOIN batches b ON unix_millis(r.ingest_time) = b.ingest_ms
        WHERE unix_millis(r.produced_at) >= {since_ms}""")
