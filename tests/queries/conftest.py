"""The lake the query tests read: small, fixed tables of every kind, built once for the package."""

from __future__ import annotations

import datetime as dt
import random
import uuid

import pytest

from pipeline.aggregates.daily import build_day
from pipeline.aggregates.live import LiveAggregates
from pipeline.cdc.dimension_tables import ensure_dimension_tables
from pipeline.tables import ensure_clicks_tables
from queries import library
from tests.support.aggregates import PRODUCTS, append_clicks, click_rows


@pytest.fixture(scope="package")
def lake(settings, spark):
    """Small, fixed tables of every kind the queries read; returns (settings, pinned snapshots, now)."""
    s = settings.model_copy(deep=True)
    x = uuid.uuid4().hex[:8]
    cat = s.catalog
    cat.clicks_table, cat.dead_letter_table = f"ods_q.clicks_{x}", f"ods_q.dead_{x}"
    cat.products_table, cat.members_table = f"dim_q.products_{x}", f"dim_q.members_{x}"
    cat.product_views_table, cat.member_activity_table = f"ads_q.views_{x}", f"ads_q.levels_{x}"
    cat.daily_users_table = f"ads_q.daily_{x}"
    rng = random.Random(21)
    today = dt.datetime.now(dt.timezone.utc).date()
    ensure_clicks_tables(spark, s)
    for _ in range(3):
        append_clicks(spark, s, click_rows(150, rng, day=today) + click_rows(50, rng, day=today - dt.timedelta(1)))
    dead = [(f"bad {i}".encode(), rng.choice(["not_json", "missing_field", "too_large"]), "reason", "t", 0, i,
             dt.datetime(2026, 11, 20, 10, i), dt.datetime(2026, 11, 20, 10, i)) for i in range(30)]
    spark.createDataFrame(dead, spark.table(cat.dead_letter_table).schema).writeTo(cat.dead_letter_table).append()

    ensure_dimension_tables(s)
    products = [(pid, name, f"desc {pid}", price, dt.datetime(2026, 11, 20)) for pid, (name, price) in PRODUCTS.items()]
    spark.createDataFrame(products, spark.table(cat.products_table).schema).writeTo(cat.products_table).append()
    spark.sql(f"MERGE INTO {cat.products_table} t USING (SELECT 'p2' AS k UNION ALL SELECT 'p3') s "
              f"ON t.productId = s.k WHEN MATCHED AND s.k = 'p2' THEN UPDATE SET product_price = 99.5 "
              f"WHEN MATCHED THEN DELETE")  # merge-on-read: position deletes
    spark._jvm.lakehouse.EqualityDeletes.deleteKeys(spark._jsparkSession, cat.products_table, "productId", ["p4"])
    members = [(f"u{i}", f"member {i}", "{}", i % 4, dt.datetime(2026, 11, 20)) for i in range(1, 41)]
    spark.createDataFrame(members, spark.table(cat.members_table).schema).writeTo(cat.members_table).append()

    LiveAggregates(spark, s).run_once()  # no progress yet: the totals of the whole click table
    build_day(spark, s, today)
    build_day(spark, s, today - dt.timedelta(1))

    tables = library.table_roles(s).values()
    pins = {t: spark.sql(f"SELECT snapshot_id FROM {t}.snapshots ORDER BY committed_at DESC LIMIT 1").first()[0]
            for t in tables}
    newest = spark.sql(f"SELECT max(committed_at) AS t FROM {cat.clicks_table}.snapshots").first().t
    now = newest.replace(tzinfo=dt.timezone.utc) + dt.timedelta(seconds=60)  # "a minute ago" = the last commit
    return s, pins, now
