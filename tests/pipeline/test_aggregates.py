"""Live aggregates: exact under replays, compaction and snapshot expiry."""

from __future__ import annotations

import random
import threading
import time
from decimal import Decimal

import pytest

from pipeline.aggregates import rollups as ru
from pipeline.aggregates.live import LiveAggregates
from tests.pipeline.aggregate_support import actual_product_views, append_clicks, click_rows, expected_product_views


@pytest.fixture
def agg_settings(click_settings, tmp_path):
    s = click_settings.model_copy(deep=True)
    suffix = s.catalog.clicks_table.rsplit("_", 1)[1]
    s.catalog.product_views_table = f"ads_test.product_views_{suffix}"
    s.catalog.member_activity_table = f"ads_test.member_activity_{suffix}"
    s.catalog.daily_users_table = f"ads_test.daily_users_{suffix}"
    s.pipeline.checkpoint_dir = tmp_path / "checkpoints"
    s.pipeline.aggregate_trigger_seconds = 0.5
    return s


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


class Running:
    """LiveAggregates in a background thread for the duration of a ``with`` block."""

    def __init__(self, spark, settings):
        self.job = LiveAggregates(spark, settings)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.job.run_until, args=(self.stop,), daemon=True)

    def __enter__(self) -> LiveAggregates:
        self.thread.start()
        return self.job

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self.thread.join(60)


def test_aggregates_follow_appends_price_changes_and_compaction(spark, agg_settings):
    rng = random.Random(3)
    append_clicks(spark, agg_settings, click_rows(300, rng))
    with Running(spark, agg_settings):
        wait_until(lambda: matches(spark, agg_settings), 120, "first aggregates")
        append_clicks(spark, agg_settings, click_rows(200, rng, price_of={"p1": Decimal("9.9900")}))
        spark.sql(f"CALL {agg_settings.catalog.name}.system.rewrite_data_files("
                  f"table => '{agg_settings.catalog.clicks_table}', options => map('min-input-files', '1'))")
        append_clicks(spark, agg_settings, click_rows(100, rng))
        wait_until(lambda: matches(spark, agg_settings), 120, "aggregates after a price change and compaction")
    views = actual_product_views(spark, agg_settings)
    assert ("p1", "product 1", Decimal("9.9900")) in views  # the new price has its own row
    assert sum(v[0] for v in views.values()) == 600


def test_expired_position_rebuilds_the_aggregates_exactly(spark, agg_settings):
    rng = random.Random(4)
    append_clicks(spark, agg_settings, click_rows(200, rng))
    with Running(spark, agg_settings) as job:
        wait_until(lambda: matches(spark, agg_settings), 120, "first aggregates")
        append_clicks(spark, agg_settings, click_rows(100, rng))  # streamed: a position in Spark's checkpoint
        wait_until(lambda: matches(spark, agg_settings) and job.state.get("position_snapshot"), 120, "streamed")
    for _ in range(2):
        append_clicks(spark, agg_settings, click_rows(100, rng))
    table = agg_settings.catalog.clicks_table
    spark.sql(f"CALL {agg_settings.catalog.name}.system.rewrite_data_files("
              f"table => '{table}', options => map('min-input-files', '1'))")
    newest = spark.sql(f"SELECT max(committed_at) AS t FROM {table}.snapshots").first().t  # session tz: UTC
    spark.sql(f"CALL {agg_settings.catalog.name}.system.expire_snapshots("
              f"table => '{table}', older_than => TIMESTAMP '{newest}', retain_last => 1)")
    with Running(spark, agg_settings) as job:
        wait_until(lambda: job.rebuilds == 1 and matches(spark, agg_settings), 180, "rebuilt aggregates")
    assert sum(v[0] for v in actual_product_views(spark, agg_settings).values()) == 500


def test_a_replayed_batch_is_not_counted_twice(spark, agg_settings):
    rng = random.Random(5)
    job = LiveAggregates(spark, agg_settings)
    job.epoch = "e1"
    for rollup in job.rollups:
        ru.backfill(None, rollup, job.epoch)
    batch = spark.createDataFrame(click_rows(50, rng)).select(*ru.SOURCE_COLUMNS, "ingest_time")
    job.apply_batch(batch, 0)
    job.apply_batch(batch, 0)  # Spark replays a batch whose commit it did not record
    job.apply_batch(batch, 1)
    total = spark.table(agg_settings.catalog.product_views_table).groupBy().sum("views").first()[0]
    assert total == 100
    levels = spark.table(agg_settings.catalog.member_activity_table).groupBy().sum("views").first()[0]
    assert levels == 100
