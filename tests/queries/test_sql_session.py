"""`lakehouse sql` and plain table names, on the real stack: what a Trino user types works here.

The seed's session (`use catalog iceberg; show schemas; use <schema>; select * from <table>
limit 100;`) runs through stdin; plain names and Trino's metadata tables give DuckDB and
Spark the same rows; a commit made between two statements of one session is seen by the
second; an unknown name lists what exists and a syntax error points at its position. The
session tests run both in-process and through the stack's SQL service (``queries.server``),
which the CLI uses when it answers and does without when it does not.
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid

import pytest

from deploy.local.processes import free_port
from lab.soak.services import child_env
from queries.client import RemoteSession
from queries.dialects import EngineGap, SyntaxProblem
from queries.duckdb_engine import DuckDBEngine
from queries.engines import open_session
from queries.names import UnknownTable
from queries.session import SqlSession, StatementError
from queries.spark_engine import SparkEngine
from tests.support.queries import rows


def _sql_cli(settings, script: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cli", "sql", "--format", "json", *args], input=script,
                          capture_output=True, text=True, env=child_env(settings), timeout=300)


def test_the_seed_session_runs_through_stdin(lake):
    settings, _, _ = lake
    schema, table = settings.catalog.clicks_table.split(".")
    done = _sql_cli(settings, f"use catalog iceberg;\nshow schemas;\nuse {schema};\nselect * from {table} limit 100;\n")
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    schemas = [line["Schema"] for line in lines if "Schema" in line]
    assert schema in schemas and "dim_q" in schemas
    clicks = [line for line in lines if "event_id" in line]
    assert len(clicks) == 100 and len({c["event_id"] for c in clicks}) == 100
    assert "USE CATALOG iceberg" in done.stderr and f"USE {schema}" in done.stderr  # each statement is timed
    assert done.stderr.count(" s\n") >= 4


def test_a_script_stops_at_its_first_error_with_a_nonzero_exit(lake):
    settings, _, _ = lake
    schema, _ = settings.catalog.clicks_table.split(".")
    done = _sql_cli(settings, f"show schemas; select * from {schema}.no_such_table; show catalogs;")
    assert done.returncode == 1
    assert "statement 2 failed" in done.stderr and "no_such_table does not exist" in done.stderr
    assert not any("Catalog" in json.loads(line) for line in done.stdout.splitlines())  # statement 3 never ran


PLAIN = [
    "SELECT count(*) AS n FROM {clicks}",
    "SELECT productId, product_price FROM iceberg.{products} ORDER BY productId",
    "SELECT count(*) AS n, count_if(operation = 'append') AS appends FROM {schema}.\"{table}$snapshots\"",
    "SELECT count(*) AS files, sum(record_count) AS n FROM {schema}.\"{table}$files\"",
    "SELECT count(*) AS n, count_if(is_current_ancestor) AS current FROM {schema}.\"{table}$history\"",
    "SELECT sum(record_count) AS n, sum(file_count) AS files FROM lakehouse.{schema}.\"{table}$partitions\"",
]


@pytest.mark.parametrize("template", PLAIN)
def test_plain_names_and_metadata_tables_give_duckdb_and_spark_the_same_rows(template, lake, spark):
    settings, _, _ = lake
    schema, table = settings.catalog.clicks_table.split(".")
    sql = template.replace("{clicks}", settings.catalog.clicks_table).replace(
        "{products}", settings.catalog.products_table).replace("{schema}", schema).replace("{table}", table)
    expected = SparkEngine(settings, spark).run(sql)
    actual = DuckDBEngine(settings).run(sql)
    assert expected.num_rows > 0 and rows(expected)[0][0]  # the fixture gives every question an answer
    assert rows(actual) == rows(expected)


@pytest.mark.parametrize("service", [False, True], ids=["in-process", "sql-service"])
def test_a_commit_between_two_statements_is_seen_by_the_next(service, lake, spark):
    settings, _, _ = lake
    table = f"own_{uuid.uuid4().hex[:6]}.visits"  # a user's own table, in a schema of its own
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {table.split('.')[0]}")
    spark.sql(f"CREATE TABLE {table} (id BIGINT, page STRING) USING iceberg TBLPROPERTIES ('format-version'='2')")
    spark.sql(f"INSERT INTO {table} VALUES (1, 'home'), (2, 'cart')")
    session = open_session("duckdb", settings, service=service)
    assert isinstance(session, RemoteSession) == service
    assert session.execute(f"USE {table.split('.')[0]}").message == f"USE {table.split('.')[0]}"

    def counts() -> tuple[int, int]:
        data = session.execute("SELECT count(*) AS n FROM visits").table
        snapshots = session.execute('SELECT count(*) AS n FROM "visits$snapshots"').table
        return data.column("n")[0].as_py(), snapshots.column("n")[0].as_py()

    assert counts() == (2, 1)
    spark.sql(f"INSERT INTO {table} VALUES (3, 'checkout')")
    assert counts() == (3, 2)  # the newest commit, data and metadata alike
    spark.sql(f"DELETE FROM {table} WHERE id = 1")
    assert counts() == (2, 3)


@pytest.mark.parametrize("service", [False, True], ids=["in-process", "sql-service"])
def test_show_and_describe_speak_trino(service, lake):
    settings, _, _ = lake
    schema, table = settings.catalog.clicks_table.split(".")
    session = open_session("duckdb", settings, service=service)
    assert schema in session.execute("SHOW SCHEMAS").table.column("Schema").to_pylist()
    assert session.execute("SHOW CATALOGS").table.column("Catalog").to_pylist() == ["iceberg"]
    assert table in session.execute(f"SHOW TABLES FROM iceberg.{schema}").table.column("Table").to_pylist()
    assert session.execute(f"SHOW TABLES FROM {schema} LIKE 'no%'").table.num_rows == 0
    described = {r["Column"]: r["Type"] for r in session.execute(f"DESCRIBE {schema}.{table}").table.to_pylist()}
    assert described["event_id"] == "varchar" and described["webpageId"] == "integer"
    assert described["event_time"] == "timestamp(6) with time zone"
    create = session.execute(f"SHOW CREATE TABLE {schema}.{table}").table.column("Create Table")[0].as_py()
    assert create.startswith(f"CREATE TABLE iceberg.{schema}.{table} (")
    assert "partitioning = ARRAY['day(event_time)']" in create and "format_version = 2" in create


def test_bad_names_list_what_exists_and_bad_syntax_points_at_it(lake):
    settings, _, _ = lake
    schema, table = settings.catalog.clicks_table.split(".")
    session: SqlSession = open_session("duckdb", settings, service=False)
    with pytest.raises(UnknownTable, match=f"tables in {schema}: .*{table}"):
        session.execute(f"SELECT * FROM {schema}.clickz")
    with pytest.raises(UnknownTable, match=f"no schema 'nowhere'; schemas: .*{schema}"):
        session.execute("SELECT * FROM nowhere.t")
    with pytest.raises(UnknownTable, match="no schema chosen"):
        session.execute(f"SELECT * FROM {table}")
    with pytest.raises(StatementError, match=f"schema 'nowhere' does not exist; schemas: .*{schema}"):
        session.execute("USE nowhere")
    with pytest.raises(StatementError, match="unknown catalog 'hive'"):
        session.execute("USE CATALOG hive")
    with pytest.raises(SyntaxProblem, match="line 1, column") as error:
        session.execute(f"SELECT count(*) FROM {schema}.{table} WHERE")
    assert error.value.args[0].splitlines()[-1].strip() == "^"

    remote = open_session("duckdb", settings)  # the same messages through the SQL service
    with pytest.raises(EngineGap, match=f"tables in {schema}: .*{table}"):
        remote.execute(f"SELECT * FROM {schema}.clickz")
    with pytest.raises(EngineGap, match="line 1, column"):
        remote.execute(f"SELECT count(*) FROM {schema}.{table} WHERE")


def test_the_cli_answers_without_the_sql_service_too(lake):
    settings, _, _ = lake
    away = settings.model_copy(deep=True)
    away.query.port = free_port(settings.query.host)  # nothing listens there: the CLI runs the query itself
    for s in (settings, away):
        done = subprocess.run([sys.executable, "-m", "cli", "query", "--format", "json", "--sql",
                               "SELECT count(*) AS n FROM {clicks}"],  # this process's {clicks}, not the service's
                              capture_output=True, text=True, env=child_env(s), timeout=300)
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout) == {"n": 600}


def test_the_shell_takes_multi_line_statements_and_keeps_them_in_its_history(lake, tmp_path, capsys):
    from prompt_toolkit.input import create_pipe_input
    from prompt_toolkit.output import DummyOutput

    from cli.sql import _interactive

    settings, _, _ = lake
    schema, table = settings.catalog.clicks_table.split(".")
    with create_pipe_input() as keys:  # Enter is \r: it ends a statement only after its ';'
        keys.send_text(f"use {schema};\rselect count(*) AS n\rfrom {table};\rselect 'a;b' AS s;\rhelp\rquit\r")
        _interactive(open_session("duckdb", settings), "json", tmp_path / "history", keys, DummyOutput())
    out, err = capsys.readouterr()
    assert [json.loads(line) for line in out.splitlines()] == [{"n": 600}, {"s": "a;b"}]
    assert f"USE {schema}" in err and "1 row in" in err and "metadata tables" in err.lower()
    history = (tmp_path / "history").read_text()
    assert f"+select count(*) AS n\n+from {table};" in history  # one entry for the two lines


def test_a_long_running_engine_keeps_one_metadata_view_per_table(lake, spark):
    """The SQL service answers for hours: the `$snapshots` view of each older snapshot is dropped, not kept."""
    settings, _, _ = lake
    schema = f"own_{uuid.uuid4().hex[:6]}"
    table = f"{schema}.visits"
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {schema}")
    spark.sql(f"CREATE TABLE {table} (id BIGINT) USING iceberg TBLPROPERTIES ('format-version'='2')")
    engine = DuckDBEngine(settings)
    for i in range(1, 4):
        spark.sql(f"INSERT INTO {table} VALUES ({i})")
        assert engine.run(f'SELECT count(*) AS n FROM {schema}."visits$snapshots"').column("n")[0].as_py() == i
    views = [r[0] for r in engine.con.execute("SELECT view_name FROM duckdb_views() WHERE NOT internal").fetchall()]
    assert len([v for v in views if "__snapshots" in v]) == 1, views
