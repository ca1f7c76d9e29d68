"""The live aggregates: which click columns each groups by, and how click rows add to the totals, in Spark.

A rollup keeps one row per key: views and ``expendTime`` add up, the users' HyperLogLog
sketch takes each ``uid``, the last event time moves forward. New rows are aggregated per key
in Spark tasks (``partial_totals``) and merged with the table's rows there: sums add, the
sketches union (Spark's ``hll_sketch_agg``/``hll_union_agg``, Apache DataSketches HLL_8), so a
key's row is the same whichever batches its clicks arrived in.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

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


def partial_totals(clicks: DataFrame, rollup: Rollup) -> DataFrame:
    """One row per key of ``clicks`` (with ``SOURCE_COLUMNS``): the measures those rows add.

    A null key is a key too (one row for all nulls); a null ``uid`` is no user, as
    ``hll_sketch_agg`` takes it.
    """
    return (clicks.groupBy(*rollup.keys)
            .agg(F.count(F.lit(1)).alias("views"),
                 F.hll_sketch_agg("uid", HLL_LG_K).alias("users_sketch"),
                 F.coalesce(F.sum("expendTime"), F.lit(0)).cast("bigint").alias("expend_time_total"),
                 F.max("event_time").alias("last_event_time"),
                 # when the row's content changed: its newest click's ingest time, a value of the data (the wall
                 # clock would be a literal of each batch's plan, new generated code to compile every batch)
                 F.max("ingest_time").alias("updated_at")))


def totals(partials: DataFrame, rollup: Rollup) -> DataFrame:
    """The result table's rows from partial totals (the table's own rows among them): one row per key."""
    merged = partials.groupBy(*rollup.keys).agg(
        F.sum("views").alias("views"),
        F.hll_union_agg("users_sketch").alias("users_sketch"),
        F.sum("expend_time_total").alias("expend_time_total"),
        F.max("last_event_time").alias("last_event_time"),
        F.max("updated_at").alias("updated_at"))  # a key this batch did not touch keeps its time
    return merged.select(*rollup.keys, "views", F.hll_sketch_estimate("users_sketch").alias("unique_users"),
                         "users_sketch", "expend_time_total", "last_event_time", "updated_at")


def added_to(current: DataFrame, clicks: DataFrame, rollup: Rollup) -> DataFrame:
    """``current`` (the result table's rows) with ``clicks`` added: the next content of the table."""
    columns = [*rollup.keys, "views", "users_sketch", "expend_time_total", "last_event_time", "updated_at"]
    return totals(current.select(*columns).unionByName(partial_totals(clicks, rollup).select(*columns)), rollup)
