"""What each engine is asked to run, checked without any server; and Trino's clear error when absent."""

from __future__ import annotations

import datetime as dt

import pytest

from lakehouse.settings import Settings
from queries import library
from queries.dialects import EngineGap, SyntaxProblem, parse, pin_now, to_sql
from queries.names import Catalogue, TableName, UnknownTable, resolve
from queries.session import is_complete, split_statements
from queries.trino_engine import TrinoEngine


def test_placeholders_become_the_names_a_trino_user_writes():
    s = Settings()
    sql = library.render(library.load("table_health").template, s)
    assert 'iceberg.ods_behavior."clickevent$files"' in sql
    assert 'iceberg.ods_behavior."clickevent$snapshots"' in sql
    assert library.render("SELECT '{\"a\": 1}' AS j FROM {clicks}", s) == \
        "SELECT '{\"a\": 1}' AS j FROM iceberg.ods_behavior.\"clickevent\""  # other braces are left alone


def test_names_resolve_with_catalog_schema_and_metadata_kind():
    catalogue = Catalogue(metastore=None, catalog_names=("iceberg", "lakehouse"))
    tree = parse('WITH recent AS (SELECT 1 AS x) SELECT * FROM iceberg.ods_behavior.clickevent c '
                 'JOIN dim_db."products$files" f ON true JOIN LAKEHOUSE.ads.t ON true JOIN recent ON true '
                 'JOIN members ON true')
    names = [name for _, name in resolve(tree, catalogue, schema="dim_db")]
    assert names == [TableName("ods_behavior", "clickevent"), TableName("dim_db", "products", "files"),
                     TableName("ads", "t"), TableName("dim_db", "members")]  # the CTE is not a table
    assert TableName("ods", "t", "files").spark("lakehouse") == "lakehouse.ods.t.files"
    with pytest.raises(UnknownTable, match="unknown catalog 'hive'"):
        resolve(parse("SELECT * FROM hive.ods.t"), catalogue, None)
    with pytest.raises(UnknownTable, match="unknown metadata table 't\\$manifestz'"):
        resolve(parse('SELECT * FROM ods."t$manifestz"'), catalogue, None)


def test_statements_split_at_semicolons_outside_strings_and_comments():
    script = "use catalog iceberg;\nshow schemas; -- a comment; with a semicolon\nselect ';' AS s\n  from t;\n"
    assert split_statements(script) == ["use catalog iceberg", "show schemas", "-- a comment; with a semicolon\n"
                                        "select ';' AS s\n  from t"]
    assert not is_complete("select ';'") and not is_complete("select 'open;") and is_complete("select 1;")


def test_a_syntax_error_points_at_its_position():
    with pytest.raises(SyntaxProblem, match="line 2, column 9") as error:
        parse("SELECT a,\n  b frm t")
    assert error.value.args[0].splitlines()[-2:] == ["    b frm t", "          ^"]


def test_every_query_has_a_description_and_parses_as_trino():
    for query in library.all_queries():
        assert query.description and not query.description.startswith("-")
        parse(library.render(query.template, Settings()))


def test_pinned_now_replaces_current_timestamp():
    tree = pin_now(parse("SELECT current_timestamp - INTERVAL '1' MINUTE AS t"), dt.datetime(2026, 1, 2, 3, 4, 5,
                                                                                               tzinfo=dt.timezone.utc))
    assert "2026-01-02 03:04:05" in to_sql(tree, "duckdb") and "CURRENT_TIMESTAMP" not in to_sql(tree, "duckdb")


def test_unknown_placeholders_and_bad_sql_are_named():
    s = Settings()
    with pytest.raises(KeyError, match="unknown table placeholder"):
        library.render("SELECT * FROM {nope}", s)
    with pytest.raises(ValueError, match="unknown metadata table"):
        library.render("SELECT * FROM {clicks:partitionz}", s)
    with pytest.raises(EngineGap, match="not valid Trino SQL"):
        parse("SELEC FROM WHERE")


def test_trino_unreachable_says_how_to_fix_it():
    s = Settings()
    s.trino.port = 1  # nothing listens there
    with pytest.raises(EngineGap, match="`lakehouse trino` starts it"):
        TrinoEngine(s).run("SELECT 1 AS one")


def test_json_output_keeps_numbers_numbers():
    """`--format json`: DuckDB's sum() of integers is a DECIMAL(38,0); JSON users expect 21000, not "21000"."""
    import datetime as dt
    import json
    from decimal import Decimal

    import pyarrow as pa

    from queries.output import render

    result = pa.table({"v": pa.array([Decimal("21000")], pa.decimal128(38, 0)),
                       "price": pa.array([Decimal("8.1000")], pa.decimal128(10, 4)),
                       "at": pa.array([dt.datetime(2026, 11, 26, 4, 41, tzinfo=dt.timezone.utc)]),
                       "name": ["x"], "none": pa.array([None], pa.int32())})
    text = render(result, "json").text
    row = json.loads(text)
    assert row == {"v": 21000, "price": 8.1, "at": "2026-11-26T04:41:00Z", "name": "x", "none": None}
    assert '"price":8.1000' in text  # the exact digits, not a float's
