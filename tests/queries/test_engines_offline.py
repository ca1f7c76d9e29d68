"""What each engine is asked to run, checked without any server; and Trino's clear error when absent."""

from __future__ import annotations

import datetime as dt

import pytest

from lakehouse.settings import Settings
from queries import library
from queries.dialects import EngineGap, parse, pin_now, to_sql
from queries.trino_engine import TrinoEngine


def test_trino_names_metadata_tables_the_trino_way():
    s = Settings()
    sql, refs = library.render(library.load("table_health").template, s, lambda r: library.trino_name(s, r))
    assert 'lakehouse.ods_behavior."clickevent$files"' in sql
    assert 'lakehouse.ods_behavior."clickevent$snapshots"' in sql
    assert {r.kind for r in refs} == {"files", "snapshots"}


def test_spark_names_metadata_tables_the_spark_way():
    s = Settings()
    sql, _ = library.render(library.load("table_health").template, s, lambda r: library.spark_name(s, r))
    assert "lakehouse.ods_behavior.clickevent.files" in sql


def test_every_query_has_a_description_and_parses_as_trino():
    for query in library.all_queries():
        assert query.description and not query.description.startswith("-")
        s = Settings()
        sql, _ = library.render(query.template, s, lambda r, s=s: library.trino_name(s, r))
        parse(sql)


def test_pinned_now_replaces_current_timestamp():
    tree = pin_now(parse("SELECT current_timestamp - INTERVAL '1' MINUTE AS t"), dt.datetime(2026, 1, 2, 3, 4, 5,
                                                                                               tzinfo=dt.timezone.utc))
    assert "2026-01-02 03:04:05" in to_sql(tree, "duckdb") and "CURRENT_TIMESTAMP" not in to_sql(tree, "duckdb")


def test_unknown_placeholders_and_bad_sql_are_named():
    s = Settings()
    with pytest.raises(KeyError, match="unknown table placeholder"):
        library.render("SELECT * FROM {nope}", s, lambda r: "x")
    with pytest.raises(ValueError, match="unknown metadata table"):
        library.render("SELECT * FROM {clicks:partitionz}", s, lambda r: "x")
    with pytest.raises(EngineGap, match="not valid Trino SQL"):
        parse("SELEC FROM WHERE")


def test_trino_unreachable_says_how_to_fix_it():
    s = Settings()
    s.trino.port = 1  # nothing listens there
    with pytest.raises(EngineGap, match="make trino"):
        TrinoEngine(s).run("SELECT 1 AS one")
