"""The live aggregates: which click columns each groups by, and how click rows add to the totals.

A rollup keeps one row per key: views and ``expendTime`` add up, the users' HyperLogLog
sketch takes each ``uid``, the last event time moves forward. The sketches are Apache
DataSketches HLL sketches serialized the way Spark's ``hll_sketch_agg`` writes them (HLL_8,
updatable), so Spark's ``hll_union``/``hll_sketch_estimate`` read the stored column as before.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field

import pyarrow as pa
from datasketches import hll_sketch, tgt_hll_type

from lakehouse.settings import Settings

#: the newest click-table snapshot a result commit includes: where the job goes on from (exactly once)
PROGRESS_PROPERTY = "lakehouse.clicks-snapshot"
#: the newest click ``ingest_time`` (epoch ms) a commit's batch read: which clicks the results reflect, so
#: a reader (and the freshness benchmarks) can tell how far behind the click table they are
THROUGH_PROPERTY = "lakehouse.clicks-through"
#: HLL precision: 2^12 buckets, ~1.6 % standard error; exact while a key has few users
HLL_LG_K = 12

#: the click columns the rollups read
SOURCE_COLUMNS = ("productId", "name", "product_price", "member_level", "uid", "expendTime", "event_time",
                  "ingest_time")

Key = tuple


@dataclass(frozen=True)
class Rollup:
    table: str
    keys: tuple[str, ...]


def rollups(settings: Settings) -> list[Rollup]:
    cat = settings.catalog
    return [
        # A price change in the product dimension starts a new (productId, name, price) row.
        Rollup(cat.product_views_table, ("productId", "name", "product_price")),
        Rollup(cat.member_activity_table, ("member_level",)),
    ]


def _new_sketch() -> hll_sketch:
    return hll_sketch(HLL_LG_K, tgt_hll_type.HLL_8)


@dataclass
class Totals:
    """One result row's measures."""

    views: int = 0
    sketch: hll_sketch = field(default_factory=_new_sketch)
    expend_time_total: int = 0
    last_event_time: dt.datetime | None = None
    updated_at: dt.datetime | None = None


def add_rows(totals: dict[Key, Totals], rows: pa.Table, rollup: Rollup, now: dt.datetime) -> None:
    """Add click ``rows`` (with ``SOURCE_COLUMNS``) to ``totals``, in place; a row of nulls counts as a key too."""
    if rows.num_rows == 0:
        return
    keys = list(rollup.keys)
    grouped = rows.select([*keys, "uid", "expendTime", "event_time"]).group_by(keys, use_threads=False).aggregate(
        [("uid", "list"), ("expendTime", "sum"), ("event_time", "max"), ([], "count_all")])
    key_values = zip(*(grouped.column(k).to_pylist() for k in keys), strict=True)
    for key, uids, expend, last, views in zip(key_values, grouped.column("uid_list").to_pylist(),
                                               grouped.column("expendTime_sum").to_pylist(),
                                               grouped.column("event_time_max").to_pylist(),
                                               grouped.column("count_all").to_pylist(), strict=True):
        entry = totals.setdefault(key, Totals())
        entry.views += views
        for uid in uids:
            if uid is not None:  # as hll_sketch_agg: a null uid is no user
                entry.sketch.update(uid)
        entry.expend_time_total += expend or 0
        if last is not None and (entry.last_event_time is None or last > entry.last_event_time):
            entry.last_event_time = last
        entry.updated_at = now


def to_arrow(totals: dict[Key, Totals], rollup: Rollup, schema: pa.Schema) -> pa.Table:
    """The result table's rows (``schema``: the table's, as Arrow)."""
    items = list(totals.items())
    columns: dict[str, list] = {k: [key[i] for key, _ in items] for i, k in enumerate(rollup.keys)}
    columns.update(
        views=[t.views for _, t in items],
        # as Spark's hll_sketch_estimate: the estimate rounded half up
        unique_users=[int(t.sketch.get_estimate() + 0.5) for _, t in items],
        users_sketch=[t.sketch.serialize_updatable() for _, t in items],
        expend_time_total=[t.expend_time_total for _, t in items],
        last_event_time=[t.last_event_time for _, t in items],
        updated_at=[t.updated_at for _, t in items])
    return pa.Table.from_pydict({f.name: columns[f.name] for f in schema}, schema=schema)


def from_arrow(rows: pa.Table, rollup: Rollup) -> dict[Key, Totals]:
    """The totals a result table holds."""
    totals: dict[Key, Totals] = {}
    for row in rows.to_pylist():
        sketch = hll_sketch.deserialize(row["users_sketch"]) if row["users_sketch"] else _new_sketch()
        totals[tuple(row[k] for k in rollup.keys)] = Totals(
            row["views"] or 0, sketch, row["expend_time_total"] or 0, row["last_event_time"], row["updated_at"])
    return totals
