"""Live aggregates: exact under restarts, compaction and snapshot expiry; their sketches read by Spark."""

from __future__ import annotations

import random
from decimal import Decimal

from pipeline.aggregates import rollups as ru
from pipeline.aggregates.live import LiveAggregates
from tests.support.aggregates import (
    Running,
    actual_product_views,
    append_clicks,
    click_rows,
    matches,
    wait_until,
)


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
        append_clicks(spark, agg_settings, click_rows(100, rng))  # read as an increment after the backfill
        wait_until(lambda: matches(spark, agg_settings) and job.results[0].position, 120, "increment")
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


def test_a_restart_counts_nothing_twice_and_spark_reads_the_sketches(spark, agg_settings):
    rng = random.Random(5)
    append_clicks(spark, agg_settings, click_rows(50, rng))
    first = LiveAggregates(spark, agg_settings)
    assert first.run_once() > 0  # no progress yet: the backfill
    append_clicks(spark, agg_settings, click_rows(50, rng))
    assert first.run_once() == 50  # the new append, read from the files it added
    assert first.run_once() == 0
    restarted = LiveAggregates(spark, agg_settings)  # as after a kill: the position comes from the result tables
    assert restarted.run_once() == 0
    cat = agg_settings.catalog
    assert spark.table(cat.product_views_table).groupBy().sum("views").first()[0] == 100
    assert spark.table(cat.member_activity_table).groupBy().sum("views").first()[0] == 100
    assert matches(spark, agg_settings)
    # the stored sketches are Spark's own format: its HLL functions estimate and union them
    rows = spark.sql(f"SELECT unique_users, hll_sketch_estimate(users_sketch) AS spark_estimate "
                     f"FROM {cat.member_activity_table}").collect()
    assert rows and all(r.unique_users == r.spark_estimate for r in rows)
    union = spark.sql(f"SELECT hll_sketch_estimate(hll_union_agg(users_sketch)) FROM {cat.member_activity_table}")
    distinct = spark.sql(f"SELECT count(DISTINCT uid) FROM {cat.clicks_table}").first()[0]
    assert union.first()[0] == distinct  # 40 users: the sketch is exact at this size
    progress = spark.sql(f"SELECT summary['{ru.PROGRESS_PROPERTY}'] AS p FROM {cat.product_views_table}.snapshots "
                         f"ORDER BY committed_at DESC LIMIT 1").first().p
    newest = spark.sql(f"SELECT snapshot_id FROM {cat.clicks_table}.snapshots ORDER BY committed_at DESC LIMIT 1")
    assert int(progress) == newest.first().snapshot_id  # the result commit names the click snapshot it includes


def test_later_batches_run_the_code_the_first_increment_compiled(spark, agg_settings):
    """An aggregates batch's plans hold nothing of their own (positions are read options, a row's time is its
    newest click's ingest time, not the wall clock), so Spark compiles their generated code once: new code every
    batch would be compiled again and run cold."""
    compilations = spark._jvm.org.apache.spark.metrics.source.CodegenMetrics.METRIC_COMPILATION_TIME()
    rng = random.Random(6)
    job = LiveAggregates(spark, agg_settings)
    for _ in range(2):  # the backfill, then the first increment
        append_clicks(spark, agg_settings, click_rows(50, rng))
        assert job.run_once() > 0
    for _ in range(2):
        append_clicks(spark, agg_settings, click_rows(50, rng))
        compiled = compilations.getCount()
        assert job.run_once() == 50
        assert compilations.getCount() == compiled, "a later batch compiled new code"
    assert matches(spark, agg_settings)
    cat = agg_settings.catalog
    newest_click = spark.sql(f"SELECT max(ingest_time) FROM {cat.clicks_table}").first()[0]
    assert spark.sql(f"SELECT max(updated_at) FROM {cat.product_views_table}").first()[0] == newest_click
