"""The daily batch: correct figures, and re-running a date replaces that date only."""

from __future__ import annotations

import datetime as dt
import random
from decimal import Decimal

from pyspark.sql import functions as F

from pipeline.aggregates.daily import build_day
from tests.support.aggregates import append_clicks, click_rows


def test_daily_summary_is_right_and_idempotent_per_date(spark, click_settings):
    s = click_settings.model_copy(deep=True)
    s.catalog.daily_users_table = s.catalog.clicks_table.replace("ods_test.clickevent", "ads_test.daily")
    rng = random.Random(9)
    d1, d2 = dt.date(2026, 11, 19), dt.date(2026, 11, 20)
    rows1, rows2 = click_rows(300, rng, day=d1), click_rows(200, rng, day=d2)
    append_clicks(spark, s, rows1 + rows2)

    assert build_day(spark, s, d1) > 0
    assert build_day(spark, s, d2) > 0
    table = spark.table(s.catalog.daily_users_table)
    first = {(r.dt, r.uid): r for r in table.collect()}

    uid = rows1[0]["uid"]
    mine = [r for r in rows1 if r["uid"] == uid]
    got = first[(d1, uid)]
    assert got.page_views == len(mine)
    assert got.sessions == len({r["cookieId"] for r in mine})
    assert got.expend_time_total == sum(r["expendTime"] for r in mine)
    assert got.distinct_products == len({r["productId"] for r in mine})
    assert got.spend_potential == sum({r["productId"]: r["product_price"] for r in mine}.values(), Decimal(0))
    assert table.filter(F.col("dt") == d1).groupBy().sum("page_views").first()[0] == 300

    # More late events for day 1: re-running day 1 replaces day 1 and leaves day 2 as it was.
    append_clicks(spark, s, click_rows(50, rng, day=d1))
    build_day(spark, s, d1)
    again = spark.table(s.catalog.daily_users_table)
    assert again.filter(F.col("dt") == d1).groupBy().sum("page_views").first()[0] == 350
    day2 = {r.uid: r.computed_at for r in again.filter(F.col("dt") == d2).collect()}
    assert day2 == {uid: r.computed_at for (d, uid), r in first.items() if d == d2}
    assert again.count() == len({(r.dt, r.uid) for r in again.collect()})  # one row per user and day
