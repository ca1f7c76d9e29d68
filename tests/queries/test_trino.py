"""Trino 476 proves the shared catalog: it reads every kind of table the pipeline writes, through the same
Hive Metastore and S3 store, and every query of the library answers on Trino as on DuckDB (a differential
test: two engines that share no code, one of them the card's own).

Trino runs the queries as written (they are Trino SQL); DuckDB pins each table's snapshot, Trino reads
the current one — the same, since the fixture's tables do not change after it builds them.
"""

from __future__ import annotations

import pytest

from queries import library
from queries.duckdb_engine import DuckDBEngine
from queries.trino_engine import TrinoEngine
from tests.support.queries import rows


@pytest.mark.parametrize("name", [q.name for q in library.all_queries()])
def test_trino_answers_like_duckdb(name, lake, trino):
    settings, pins, now = lake
    template = library.load(name).template
    expected = DuckDBEngine(settings).run(template, now=now, snapshots=pins)
    actual = TrinoEngine(settings).run(template, now=now)
    assert [c.lower() for c in actual.column_names] == [c.lower() for c in expected.column_names]
    assert expected.num_rows > 0, f"{name}: the fixture should give every query something to return"
    assert rows(actual) == rows(expected)


def test_deletes_of_both_kinds_reach_trino(lake, trino):
    """The product dimension after a MERGE (position deletes) and a streaming-style equality delete."""
    settings, _, _ = lake
    result = TrinoEngine(settings).run(library.load("product_dimension").template)
    by_id = {r["productId"]: r for r in result.to_pylist()}
    assert set(by_id) == {"p1", "p2", "p5"}  # p3: position delete, p4: equality delete
    assert float(by_id["p2"]["product_price"]) == 99.5


def test_time_travel_and_metadata_tables(lake, trino, spark):
    settings, _, _ = lake
    table = settings.catalog.clicks_table
    namespace, name = table.split(".")
    snapshots = spark.sql(f"SELECT snapshot_id FROM {settings.catalog.name}.{table}.snapshots "
                          "ORDER BY committed_at").collect()
    assert len(snapshots) >= 3
    first = snapshots[0].snapshot_id
    rows_then = spark.sql(f"SELECT count(*) AS n FROM {settings.catalog.name}.{table} VERSION AS OF {first}").first().n
    engine = TrinoEngine(settings)
    then = engine.run(f"SELECT count(*) AS n FROM {table} FOR VERSION AS OF {first}").to_pylist()
    now = engine.run(f"SELECT count(*) AS n FROM {table}").to_pylist()
    assert then == [{"n": rows_then}] and now[0]["n"] > rows_then
    listed = engine.run(f'SELECT snapshot_id FROM {namespace}."{name}$snapshots" ORDER BY committed_at')
    assert listed["snapshot_id"].to_pylist() == [s.snapshot_id for s in snapshots]
    assert engine.run(f"SELECT count(*) AS n FROM {settings.catalog.dead_letter_table}").to_pylist() == [{"n": 30}]


def test_the_seed_session_runs_verbatim_in_the_real_cli(lake, trino, settings):
    """The card's user session (seed 001), typed into the Trino CLI 476 as a user would, on the lake's click table."""
    import subprocess

    from deploy.local.services.trino import cli_command

    lake_settings, _, _ = lake
    namespace, name = lake_settings.catalog.clicks_table.split(".")
    session = f"use {namespace};\nselect * from {name} limit 100;\n"
    done = subprocess.run(cli_command(settings, ["--output-format=CSV_HEADER"], interactive=False), input=session,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.strip().splitlines()
    assert '"event_id"' in lines[0] and '"uid"' in lines[0]
    assert len(lines) == 101, "a header and the 100 rows asked for"
    assert "Unable to create a system terminal" not in done.stderr, "the CLI fed by a pipe stays quiet"
