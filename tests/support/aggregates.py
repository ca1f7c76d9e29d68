"""Helpers for the downstream tests: click rows written straight into the click table."""

from __future__ import annotations

import datetime as dt
import random
import time
import uuid
from decimal import Decimal

from pipeline.aggregates.live import LiveAggregates
from pipeline.tables import ensure_clicks_tables
from tests.support.looping import Looping

PRODUCTS = {f"p{i}": (f"product {i}", Decimal(f"{i}.50")) for i in range(1, 6)}


def click_rows(n: int, rng: random.Random, day: dt.date | None = None, price_of: dict | None = None) -> list[dict]:
    prices = price_of or {}
    day = day or dt.datetime.now(dt.timezone.utc).date()
    rows = []
    for _ in range(n):
        pid = rng.choice(list(PRODUCTS))
        name, price = PRODUCTS[pid]
        uid = f"u{rng.randint(1, 40)}"
        when = dt.datetime.combine(day, dt.time(rng.randint(0, 23), rng.randint(0, 59)))
        rows.append({
            "event_id": uuid.uuid4().hex, "webpageId": rng.randint(1, 9), "uid": uid, "productId": pid,
            "cookieId": f"c{uid}-{rng.randint(1, 3)}", "expendTime": rng.randint(1, 100),
            "updateTime": int(when.replace(tzinfo=dt.timezone.utc).timestamp() * 1000),
            "name": name, "product_price": prices.get(pid, price),
            "member_level": None if uid.endswith("7") else int(uid[1:]) % 4,
            "event_time": when, "produced_at": when, "ingest_time": dt.datetime.now(dt.timezone.utc).replace(tzinfo=None),
            "kafka_topic": "t", "kafka_partition": 0, "kafka_offset": rng.randint(0, 10**9),
        })
    return rows


def append_clicks(spark, settings, rows: list[dict]) -> None:
    """One append commit of ``rows`` to the click table (as the ingestion job would make)."""
    ensure_clicks_tables(spark, settings)
    table = settings.catalog.clicks_table
    schema = spark.table(table).schema
    spark.createDataFrame([tuple(r[f.name] for f in schema.fields) for r in rows], schema).writeTo(table).append()


def expected_product_views(spark, settings) -> dict[tuple, tuple[int, int]]:
    rows = spark.sql(f"SELECT productId, name, product_price, count(*) AS views, count(DISTINCT uid) AS users "
                     f"FROM {settings.catalog.clicks_table} GROUP BY 1, 2, 3").collect()
    return {(r.productId, r.name, r.product_price): (r.views, r.users) for r in rows}


def actual_product_views(spark, settings) -> dict[tuple, tuple[int, int]]:
    rows = spark.table(settings.catalog.product_views_table).collect()
    return {(r.productId, r.name, r.product_price): (r.views, r.unique_users) for r in rows}


def matches(spark, settings) -> bool:
    expected, actual = expected_product_views(spark, settings), actual_product_views(spark, settings)
    if expected.keys() != actual.keys():
        return False
    return all(actual[k][0] == v[0] and abs(actual[k][1] - v[1]) <= max(1, 0.02 * v[1]) for k, v in expected.items())


def wait_until(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(1)
    raise AssertionError(f"timed out after {timeout:.0f}s: {what}")


def Running(spark, settings) -> Looping:  # noqa: N802 - used as a context manager, like a class
    """LiveAggregates in a background thread for the duration of a ``with`` block."""
    return Looping(LiveAggregates(spark, settings), settings.pipeline.aggregate_trigger_seconds, close=False)

