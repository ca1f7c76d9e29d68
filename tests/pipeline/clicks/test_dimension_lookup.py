"""Large dimensions are looked up per batch in the source database (issue 41), on real MariaDB, Kafka, S3, Spark.

The lake's dimension tables stay empty here: every value a click carries came from the lookup.
"""

from __future__ import annotations

import time
import uuid

import pytest

from deploy.local.services.mariadb import connect, create_source_database
from lakehouse.settings import secret
from pipeline.clicks.job import ClickIngestJob
from pipeline.dimension_lookup import KeyLookup, LookupSpec, LookupUnavailable
from tests.support.clicks import drain, rows


@pytest.fixture
def lookup_settings(click_settings):
    s = click_settings
    s.mariadb.database = f"shop_lookup_{uuid.uuid4().hex[:8]}"
    create_source_database(s, s.mariadb.database)
    s.pipeline.dimension_lookup_rows = 0  # the seed's 9 products and 5 members, looked up as if they were millions
    s.pipeline.dimension_refresh_seconds = 3
    return s


def execute(s, sql: str) -> None:
    with connect(s, database=s.mariadb.database) as conn, conn.cursor() as cur:
        cur.execute(sql)


def test_clicks_are_enriched_by_lookup_and_a_change_reaches_new_clicks_within_the_refresh_interval(
        spark, lookup_settings, producer):
    s = lookup_settings
    job = ClickIngestJob(spark, s)
    try:
        producer.send(40, productId="1", uid="513248")
        producer.send(10, productId="19", uid="nobody")  # unknown in the source: nulls, as in the seed
        drain(job)
        first = set(producer.sent.valid)
        execute(s, "UPDATE products SET name = 'renamed', product_price = 8.1 WHERE productId = '1'")
        execute(s, "UPDATE user_member SET memberLevel = 4 WHERE userid = '513248'")
        changed_at = time.monotonic()
        time.sleep(s.pipeline.dimension_refresh_seconds + 0.5)  # the bound: a cached value is at most this old
        producer.send(40, productId="1", uid="513248")
        drain(job)
        assert time.monotonic() - changed_at < 60
    finally:
        job.close()
    got = {r.event_id: r for r in rows(spark, s.catalog.clicks_table)}
    assert len(got) == 90
    for event_id, r in got.items():
        if r.productId == "19":
            assert (r.name, r.product_price, r.member_level) == (None, None, None)
        elif event_id in first:
            assert (r.name, str(r.product_price), r.member_level) == ("test01", "1.1000", 1)
        else:
            assert (r.name, str(r.product_price), r.member_level) == ("renamed", "8.1000", 4)
    assert spark.table(s.catalog.members_table).count() == 0  # nothing came from the lake's copy


def test_a_cached_value_is_served_until_its_time_is_up_and_unknown_keys_are_cached_too(lookup_settings):
    s = lookup_settings
    spec = LookupSpec(s.mariadb.host, s.mariadb.port, s.mariadb.cdc_user,
                      secret(s.mariadb.cdc_password, "mariadb.cdc_password"), s.mariadb.database, "user_member",
                      "userid", ("memberLevel",), cache_rows=10, ttl_s=2.0)
    keys = KeyLookup(spec)
    assert keys.values(["513248", "nobody"]) == {"513248": (1,), "nobody": None}
    execute(s, "UPDATE user_member SET memberLevel = 5 WHERE userid = '513248'")
    execute(s, "INSERT INTO user_member (userid, name, memberLevel) VALUES ('nobody', 'n', 2)")
    assert keys.values(["513248", "nobody"]) == {"513248": (1,), "nobody": None}  # within the TTL: cached
    time.sleep(2.2)
    assert keys.values(["513248", "nobody"]) == {"513248": (5,), "nobody": (2,)}


def test_an_unreachable_database_fails_the_lookup_with_what_and_where(lookup_settings):
    s = lookup_settings
    spec = LookupSpec(s.mariadb.host, 1, s.mariadb.cdc_user, "x", s.mariadb.database, "user_member", "userid",
                      ("memberLevel",), cache_rows=10, ttl_s=2.0)
    with pytest.raises(LookupUnavailable, match=rf"user_member at {s.mariadb.host}:1 failed"):
        KeyLookup(spec).values(["513248"])
