"""The peers of `lakehouse bench peers` do the pipeline's job on the real stack: every event once, enriched right.

Each peer runs as the benchmark runs it (its own process on the test stack's broker, metastore,
object store and shop database), a few thousand events through it; then its table is read back:
every (partition, offset) the producer wrote is there once, and each row's product name and
price and member level are the shop database's for its keys (NULL for a key it does not hold).
"""

from __future__ import annotations

import uuid

import pytest

from deploy.local.services.mariadb import connect
from lab.bench.peers import flink, run_one, spark_structured_streaming, this_pipeline
from lab.bench.scratch import discard
from lakehouse.catalog import pyiceberg_catalog
from pipeline.cdc.dimension_tables import ensure_dimension_tables

pytestmark = pytest.mark.stack


def _shop(settings) -> tuple[dict, dict]:
    with connect(settings, database=settings.mariadb.database) as conn, conn.cursor() as cur:
        cur.execute("SELECT productId, name, product_price FROM products")
        products = {row[0]: (row[1], row[2]) for row in cur.fetchall()}
        cur.execute("SELECT userid, memberLevel FROM user_member")
        members = dict(cur.fetchall())
    return products, members


@pytest.fixture(scope="module")
def lake_dims(settings, spark):
    """Settings whose lake dimension tables hold the shop's rows (the Spark peer joins those; Flink asks the shop)."""
    s = settings.model_copy(deep=True)
    suffix = uuid.uuid4().hex[:8]
    s.catalog.products_table, s.catalog.members_table = f"dim_test.products_{suffix}", f"dim_test.members_{suffix}"
    ensure_dimension_tables(s)
    products, members = _shop(s)
    spark.sql(f"INSERT INTO {s.catalog.products_table} VALUES " + ", ".join(
        f"('{k}', '{name}', NULL, {price}, current_timestamp())" for k, (name, price) in products.items()))
    spark.sql(f"INSERT INTO {s.catalog.members_table} VALUES " + ", ".join(
        f"('{k}', 'm', NULL, {level}, current_timestamp())" for k, level in members.items()))
    yield s
    discard(s, [s.catalog.products_table, s.catalog.members_table], [])


@pytest.mark.parametrize("system", [flink(1.0), spark_structured_streaming(1.0), this_pipeline(0.5)],
                         ids=["flink", "spark", "pipeline"])
def test_a_peer_writes_every_event_once_enriched_from_the_shop(lake_dims, system):
    settings = lake_dims
    result = run_one(settings, system, rate=500, duration=4, keep=True)
    table = result.table
    try:
        assert result.caught_up and result.exactly_once, result
        assert result.produced >= 2_000 + 1_500  # the warm-up and the measured run
        assert 0 < result.p50_s <= result.p95_s <= result.p99_s < 60
        rows = pyiceberg_catalog(settings).load_table(table).scan(
            selected_fields=("uid", "productId", "name", "product_price", "member_level")).to_arrow().to_pylist()
        products, members = _shop(settings)
        assert {r["productId"] for r in rows} & products.keys(), "no event named a product the shop holds"
        for r in rows:
            assert (r["name"], r["product_price"]) == products.get(r["productId"], (None, None)), r
            assert r["member_level"] == members.get(r["uid"]), r
    finally:
        discard(settings, [table], [result.topic])
