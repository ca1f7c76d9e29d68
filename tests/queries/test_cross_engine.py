"""Every query in queries/sql gives the same answer on DuckDB as on Spark SQL, same snapshots.

The tables include position deletes (MERGE on the merge-on-read product dimension) and
equality deletes (written like a streaming upsert would), which DuckDB must apply.
"""

from __future__ import annotations

import decimal

import pytest

from queries import library
from queries.dialects import EngineGap
from queries.duckdb_engine import DuckDBEngine
from queries.spark_engine import SparkEngine
from tests.support.queries import rows


@pytest.mark.parametrize("name", [q.name for q in library.all_queries()])
def test_duckdb_answers_like_spark(name, lake, spark):
    settings, pins, now = lake
    template = library.load(name).template
    expected = SparkEngine(settings, spark).run(template, now=now, snapshots=pins)
    actual = DuckDBEngine(settings).run(template, now=now, snapshots=pins)
    assert [c.lower() for c in actual.column_names] == [c.lower() for c in expected.column_names]
    assert expected.num_rows > 0, f"{name}: the fixture should give every query something to return"
    assert rows(actual) == rows(expected)


def test_deletes_of_both_kinds_are_applied(lake):
    settings, pins, now = lake
    result = DuckDBEngine(settings).run(library.load("product_dimension").template, snapshots=pins)
    by_id = {r["productId"]: r for r in result.to_pylist()}
    assert set(by_id) == {"p1", "p2", "p5"}  # p3: position delete, p4: equality delete
    assert by_id["p2"]["product_price"] == decimal.Decimal("99.5")


def test_a_gap_is_named_not_answered_wrongly(lake):
    settings, _, _ = lake
    with pytest.raises(EngineGap, match="time travel on a metadata table"):
        DuckDBEngine(settings).run("SELECT count(*) FROM {clicks:files} FOR VERSION AS OF 1")
    with pytest.raises(EngineGap, match="DuckDB could not run"):
        DuckDBEngine(settings).run("SELECT no_such_function(1) FROM {clicks}")
