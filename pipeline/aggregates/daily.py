"""`lakehouse run batch --date D`: the daily user-behaviour summary.

One row per user and event day: sessions (distinct cookieId), page views, total
expendTime, distinct products, and the spend potential (the summed prices of the
distinct products viewed). The day is replaced atomically (an Iceberg overwrite by
filter), so re-running a date changes that date only and an empty day clears it.
"""

from __future__ import annotations

import datetime as dt

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from lakehouse.settings import Settings
from pipeline.tables import ensure_daily_table


def day_summary(clicks: DataFrame, day: dt.date) -> DataFrame:
    """The summary rows of ``day`` from click rows (pure: no table is read or written)."""
    of_day = clicks.filter(F.to_date("event_time") == F.lit(day))
    # member level as of the user's last event that day
    last = Window.partitionBy("uid").orderBy(F.col("event_time").desc(), F.col("kafka_offset").desc())
    levels = (of_day.withColumn("_n", F.row_number().over(last)).filter("_n = 1")
              .select("uid", "member_level"))
    products = (of_day.groupBy("uid", "productId").agg(F.max("product_price").alias("price"))
                .groupBy("uid").agg(F.count("productId").alias("distinct_products"),
                                    F.coalesce(F.sum("price"), F.lit(0)).cast("decimal(18,4)").alias("spend_potential")))
    activity = of_day.groupBy("uid").agg(
        F.countDistinct("cookieId").alias("sessions"),
        F.count(F.lit(1)).alias("page_views"),
        F.coalesce(F.sum("expendTime"), F.lit(0)).cast("bigint").alias("expend_time_total"))
    return (activity.join(levels, "uid").join(products, "uid")
            .select(F.lit(day).alias("dt"), "uid", "member_level", "sessions", "page_views", "expend_time_total",
                    "distinct_products", "spend_potential", F.current_timestamp().alias("computed_at")))


def build_day(spark, settings: Settings, day: dt.date) -> int:
    """Replace ``day`` in the daily table; return the number of user rows written."""
    ensure_daily_table(spark, settings)
    start = dt.datetime.combine(day, dt.time())
    clicks = (spark.table(settings.catalog.clicks_table)  # partition pruning on days(event_time)
              .filter((F.col("event_time") >= F.lit(start)) & (F.col("event_time") < F.lit(start + dt.timedelta(days=1)))))
    summary = day_summary(clicks, day).cache()
    try:
        rows = summary.count()
        summary.writeTo(settings.catalog.daily_users_table).overwrite(F.col("dt") == F.lit(day))
    finally:
        summary.unpersist()
    return rows
