"""Freshness per table, measured the way a reader sees it, against the product's goals.

For every row: the commit time of the Iceberg snapshot that made it visible minus the time
it happened upstream.
- clicks: the Kafka produce timestamp (``produced_at``) -> the first click-table commit whose
  recorded Kafka offsets passed the row's offset (each batch's ``append`` snapshot records where
  the job stands), so the click job's merges of its own files, which move rows into files
  committed later, do not count;
- dimensions: the database's ``update_time`` of the row's last change -> the first dimension
  table snapshot that held it (rows changed since the run began; a key changed twice counts
  once). The dimension writer rewrites a file that holds a changed key (copy-on-write), so
  the row's current file may be younger than the row: the row is looked for in the files
  each snapshot added (``first_visible``);
- live aggregates: the click's produce timestamp -> the first commit of the result table
  whose batch read the click (each aggregate commit records the newest click batch it
  read, ``lakehouse.clicks-through``).

Dimension rows are found in the files each snapshot added, so the runs that measure them keep
every snapshot (no maintenance).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyiceberg.manifest import ManifestContent, ManifestEntryStatus

from lakehouse.catalog import pyiceberg_catalog
from lakehouse.settings import Settings
from pipeline.aggregates.rollups import THROUGH_PROPERTY
from pipeline.kafka_source.offsets import OFFSETS_PROPERTY, decode

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
    percentiles_s: tuple[float, ...] = ()  # p1..p99, the curve the demo report draws (p50/p95/p99 among them)

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


#: the percentiles a Freshness keeps (1..99): its p50, p95 and p99 are three of them
PERCENTS = tuple(range(1, 100))


def _measured(name: str, tables: str, curve: list[float], rows: int) -> Freshness:
    """A Freshness whose p50/p95/p99 are read off ``curve`` (seconds at each of ``PERCENTS``)."""
    if not curve:
        return Freshness(name, tables, math.nan, math.nan, math.nan, rows)
    at = dict(zip(PERCENTS, curve, strict=True))
    return Freshness(name, tables, at[50], at[95], at[99], rows, tuple(curve))


def _quantiles(spark, name: str, tables: str, delays_sql: str) -> Freshness:
    """``delays_sql`` yields one column ``delay_ms`` per row measured."""
    cuts = ", ".join(f"{p / 100:g}" for p in PERCENTS)
    row = spark.sql(f"SELECT percentile_approx(delay_ms / 1000.0, array({cuts}), 10000) AS q, "
                    f"count(*) AS n FROM ({delays_sql})").first()
    return _measured(name, tables, [float(x) for x in row.q] if row.q else [], int(row.n))


def clicks(spark, table: str, since_ms: int) -> Freshness:
    """Produce -> visible, for click rows produced since ``since_ms``: each row's offset against the offsets the
    table's commits recorded, in commit order."""
    commits = spark.sql(f"SELECT unix_millis(committed_at) AS ms, summary['{OFFSETS_PROPERTY}'] AS offsets "
                        f"FROM {table}.snapshots WHERE operation = 'append' ORDER BY committed_at").collect()
    ends: dict[tuple[str, int], tuple[list[int], list[int]]] = {}  # (topic, partition) -> (end offsets, ms)
    for commit in commits:
        for topic, parts in decode(commit.offsets).items():
            for partition, end in parts.items():
                offsets, times = ends.setdefault((topic, partition), ([], []))
                if not offsets or end > offsets[-1]:
                    offsets.append(end)
                    times.append(commit.ms)
    rows = spark.sql(f"SELECT kafka_topic, kafka_partition, kafka_offset, unix_millis(produced_at) AS produced_ms "
                     f"FROM {table} WHERE unix_millis(produced_at) >= {since_ms}").toArrow()
    delays: list[np.ndarray] = []
    for (topic, partition), (offsets, times) in ends.items():
        mine = rows.filter(pc.and_(pc.equal(rows["kafka_topic"], topic), pc.equal(rows["kafka_partition"], partition)))
        if not mine.num_rows:
            continue
        # the first commit whose end offset is past the row's offset made it visible
        first = np.searchsorted(np.asarray(offsets), mine["kafka_offset"].to_numpy(), side="right")
        seen = first < len(offsets)
        delays.append(np.asarray(times)[first[seen]] - mine["produced_ms"].to_numpy()[seen])
    measured = np.concatenate(delays) if delays else np.array([])
    curve = [float(x) / 1000 for x in np.percentile(measured, PERCENTS)] if measured.size else []
    return _measured("clicks", table, curve, int(measured.size))


def dimensions(spark, settings: Settings, since_ms: int) -> Freshness:
    """Database change -> visible, for product and member rows last changed since ``since_ms``."""
    catalog, delays = pyiceberg_catalog(settings), []
    for lake in (settings.table("products"), settings.table("members")):
        table, key = lake.table, lake.key
        assert key is not None  # the seed's dimensions name their keys (table_registry)
        iceberg = catalog.load_table(table)
        current = iceberg.scan(selected_fields=(key, "update_time")).to_arrow()
        first = first_visible(iceberg, (key, "update_time"), since_ms)
        for row in _as_ms(current, key, "update_time").to_pylist():
            seen = first.get((row[key], row["update_time"]))
            if row["update_time"] is not None and row["update_time"] >= since_ms and seen is not None:
                delays.append(seen - row["update_time"])
    return _from_delays("dimensions", f"{settings.catalog.products_table}, {settings.catalog.members_table}",
                        delays)


def first_visible(table, columns: tuple[str, str], since_ms: int, prefix: str | None = None) -> dict[tuple, int]:
    """(first column, second column) of every row written since ``since_ms`` -> commit ms of the first
    snapshot that held it, read from the data files each snapshot added (a PyIceberg ``table``).
    With ``prefix``, only rows whose second column starts with it (a large table's marked changes).

    Timestamps come back as epoch milliseconds. Snapshots expired since are not seen: measure
    runs without maintenance, as for the other tables.
    """

    first: dict[tuple, int] = {}
    snapshots = sorted((s for s in table.snapshots() if s.timestamp_ms >= since_ms), key=lambda s: s.sequence_number)
    for snapshot in snapshots:
        for rows in added_rows(table, snapshot, columns):
            if prefix is not None:
                rows = rows.filter(pc.starts_with(rows.column(columns[1]), prefix))
            for a, b in zip(*(_as_ms(rows, *columns).column(c).to_pylist() for c in columns), strict=True):
                first.setdefault((a, b), snapshot.timestamp_ms)
    return first


def added_rows(table, snapshot, columns: Sequence[str]) -> Iterator[pa.Table]:
    """``columns`` of each data file ``snapshot`` added (a PyIceberg table's): the rows it made visible."""
    for manifest in snapshot.manifests(table.io):
        if manifest.content != ManifestContent.DATA or manifest.added_snapshot_id != snapshot.snapshot_id:
            continue
        for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=True):
            if entry.status == ManifestEntryStatus.ADDED:
                with table.io.new_input(entry.data_file.file_path).open() as stream:
                    yield pq.read_table(stream, columns=list(columns))


class MarkedFreshness:
    """Freshness of marked changes, read as the table is written: for long runs whose old snapshots expire.

    ``first_visible`` reads every snapshot at the end; a writer that expires its snapshots (the
    dimension writer keeps ten minutes) would have removed the first hour's by then. Polled every
    few seconds, this reads each new snapshot once: the rows its new data files hold whose
    ``columns[1]`` is ``prefix`` + the database commit in epoch ms, each a delay = commit time of
    the snapshot - that time. A fold (a ``replace`` snapshot) adds no row version, only moves
    rows, so it is skipped: each marked row then counts once, with no set of rows seen to keep.
    """

    def __init__(self, columns: tuple[str, str], since_ms: int, prefix: str):
        self.columns, self.since_ms, self.prefix = columns, since_ms, prefix
        self.seen: set[int] = set()
        self.delays_ms: list[int] = []

    def poll(self, table) -> None:
        """Read the snapshots committed since the last poll."""
        new = sorted((s for s in table.snapshots() if s.timestamp_ms >= self.since_ms and s.snapshot_id not in self.seen),
                     key=lambda s: s.sequence_number)
        for snapshot in new:
            self.seen.add(snapshot.snapshot_id)
            if snapshot.summary is not None and snapshot.summary.operation.value == "replace":
                continue
            for rows in added_rows(table, snapshot, [self.columns[1]]):
                marks = rows.column(0).filter(pc.starts_with(rows.column(0), self.prefix)).to_pylist()
                self.delays_ms += [snapshot.timestamp_ms - int(m[len(self.prefix):]) for m in marks]

    def quantiles_s(self, percents: tuple[int, ...] = (50, 95)) -> list[float]:
        if not self.delays_ms:
            return [math.nan] * len(percents)
        return [x / 1000 for x in quantiles(self.delays_ms, percents)]


def _as_ms(rows: pa.Table, *columns: str) -> pa.Table:
    """``rows`` with its timestamp columns as epoch milliseconds."""
    for name in columns:
        column = rows.column(name)
        if pa.types.is_timestamp(column.type):
            ms = pc.cast(pc.cast(column, pa.timestamp("ms", tz=column.type.tz), safe=False), pa.int64())
            rows = rows.set_column(rows.schema.get_field_index(name), name, ms)
    return rows


def quantiles(values: Sequence[float], percents: tuple[int, ...]) -> list[float]:
    """The given percentiles of ``values`` (linear between the nearest ranks)."""
    if len(values) == 1:
        return [float(values[0])] * len(percents)
    cuts = statistics.quantiles(values, n=100, method="inclusive")
    return [cuts[p - 1] for p in percents]


def _from_delays(name: str, tables: str, delays_ms: list[int]) -> Freshness:
    curve = [x / 1000 for x in quantiles(delays_ms, PERCENTS)] if delays_ms else []
    return _measured(name, tables, curve, len(delays_ms))


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
