"""The snapshot's after-images built by the server are the ones the capture builds itself, on a real MariaDB.

The server-side path (``server_json_select``) is only taken for column types whose JSON it
writes as the capture does; this checks every one of them, with the awkward values (quotes,
backslashes, control characters, non-ASCII, NULL, the extremes of each type, each TIMESTAMP
precision), against the row-by-row path over the same rows, and that the Kafka keys are the
same bytes (a key placed in another partition than its later changes would reorder them).
"""

from __future__ import annotations

import msgspec
import pytest

from deploy.local.services.mariadb import connect
from pipeline.capture import envelope as env
from pipeline.capture import snapshot_read
from pipeline.capture.snapshot_read import json_rows, server_images, server_json_select, table_rows
from pipeline.capture.source_schema import read_source_schema

pytestmark = pytest.mark.stack

TABLE = "snapshot_json_types"
COLUMNS = """
  id VARCHAR(40) NOT NULL PRIMARY KEY,
  tiny TINYINT, small SMALLINT UNSIGNED, medium MEDIUMINT, whole INT, big BIGINT, huge BIGINT UNSIGNED,
  flag TINYINT(1), short_text CHAR(4), label VARCHAR(255), body TEXT, medium_body MEDIUMTEXT,
  size ENUM('s', 'm', 'l'), price DECIMAL(10,4), wide DECIMAL(38,10), negative DECIMAL(6,2),
  at3 TIMESTAMP(3) NULL, at0 TIMESTAMP NULL, at6 TIMESTAMP(6) NULL
"""
ROWS = [
    ("a", 1, 2, 3, 4, 5, 6, 1, "ab", "plain", "text", "long", "s", "1.2345", "12345678901234567890.1234567890",
     "-1.50", "2026-11-26 04:41:18.123", "2026-11-26 04:41:18", "2026-11-26 04:41:18.987654"),
    ("b \"quoted\" \\ back", -128, 65535, -8388608, -2147483648, -9223372036854775808, 18446744073709551615, 0,
     "\u00e9\u00e8", "tab\there\nnew line \"q\" \\ \u0001 \u00fc\u4e2d\U0001f600", "", "x" * 5000, "l", "0.0000",
     "-0.0000000001", "0.00", "1970-01-01 00:00:01.000", "2038-01-19 03:14:07", "2000-02-29 23:59:59.000001"),
    ("c", None, None, None, None, None, None, None, None, None, None, None, None, None, None, None, None, None, None),
    ("d\ttab\nline \u00e9\u4e2d", 7, None, None, None, None, None, None, None, "x", None, None, "m", "9.9900", None,
     None, None, None, None),
]


@pytest.fixture
def source(settings):
    with connect(settings, database=settings.mariadb.database) as conn, conn.cursor() as cur:
        cur.execute(f"DROP TABLE IF EXISTS {TABLE}")
        cur.execute(f"CREATE TABLE {TABLE} ({COLUMNS})")
        cur.execute("SET SESSION time_zone = '+00:00'")
        cur.executemany(f"INSERT INTO {TABLE} VALUES ({', '.join(['%s'] * len(ROWS[0]))})", ROWS)
    yield settings
    with connect(settings, database=settings.mariadb.database) as conn, conn.cursor() as cur:
        cur.execute(f"DROP TABLE IF EXISTS {TABLE}")


def _snapshot_connection(settings):
    conn = connect(settings, database=settings.mariadb.database, conv=env.SNAPSHOT_CONVERSIONS)
    with conn.cursor() as cur:
        cur.execute("SET SESSION time_zone = '+00:00'")  # as open_consistent_read sets it
    return conn


def test_server_built_images_and_keys_equal_the_capture_built_ones(source):
    with _snapshot_connection(source) as conn:
        with conn.cursor() as cur:
            schema = read_source_schema(cur, source.mariadb.database, TABLE)
        select = server_json_select(conn, schema)
        assert select is not None, "every column here is of a type the server path takes"
        envelopes = env.SnapshotEnvelopes([c.name for c in schema.columns], schema.key, connector="mariadb",
                                          name="cdc.shop", db="shop", table=TABLE, server_id=1, ts_ms=1, file="f",
                                          pos=4)
        by_python = [envelopes.encode(values, n, last) for n, (_, values, last) in
                     enumerate(table_rows(conn, TABLE, schema.key))]
        by_server = [envelopes.encode_image(values[:1], values[1], n, last) for n, (_, values, last) in
                     enumerate(json_rows(conn, select))]
    _assert_same(by_server, by_python)
    decoded = msgspec.json.decode(by_server[1][1])["after"]
    assert decoded["label"] == ROWS[1][9] and decoded["huge"] == 18446744073709551615
    assert decoded["at6"] == "2000-02-29T23:59:59.000Z" and decoded["wide"] == "-0.0000000001"


def _assert_same(by_server: list[tuple[bytes, bytes]], by_python: list[tuple[bytes, bytes]]) -> None:
    assert len(by_server) == len(by_python) == len(ROWS)
    for (key_s, value_s), (key_p, value_p) in zip(by_server, by_python, strict=True):
        assert key_s == key_p  # the same bytes: the same partition
        server, python = msgspec.json.decode(value_s), msgspec.json.decode(value_p)
        server.pop("ts_ms"), python.pop("ts_ms")
        assert server == python, (server["after"], python["after"])


def _envelopes(schema):
    return env.SnapshotEnvelopes([c.name for c in schema.columns], schema.key, connector="mariadb", name="cdc.shop",
                                 db="shop", table=schema.table, server_id=1, ts_ms=1, file="f", pos=4)


@pytest.mark.parametrize("page_rows", [1, 2, len(ROWS), 10_000], ids=["pages-of-1", "pages-of-2", "one-full-page",
                                                                       "one-part-page"])
@pytest.mark.parametrize("cut", [False, True], ids=["whole-pages", "pages-cut-read-row-by-row"])
def test_server_built_pages_give_the_rows_and_keys_the_capture_builds(source, monkeypatch, page_rows, cut):
    if cut:  # every page longer than the server may build: each is read again row by row
        monkeypatch.setattr(snapshot_read, "PAGE_BYTES", 64)
    with _snapshot_connection(source) as conn:
        with conn.cursor() as cur:
            schema = read_source_schema(cur, source.mariadb.database, TABLE)
        envelopes = _envelopes(schema)
        by_python = [envelopes.encode(values, n, last) for n, (_, values, last) in
                     enumerate(table_rows(conn, TABLE, schema.key))]
        images = server_images(conn, schema, page_rows=page_rows)
        assert images is not None
        by_pages = [envelopes.encode_image(key, image, n, last) for n, (key, image, last) in enumerate(images)]
    _assert_same(by_pages, by_python)
    assert [msgspec.json.decode(value)["source"]["snapshot"] for _, value in by_pages][-2:] == ["true", "last"]


def test_an_integer_key_is_paged_in_its_numeric_order(settings):
    with connect(settings, database=settings.mariadb.database) as conn, conn.cursor() as cur:
        cur.execute("DROP TABLE IF EXISTS snapshot_int_key")
        cur.execute("CREATE TABLE snapshot_int_key (id BIGINT UNSIGNED PRIMARY KEY, label VARCHAR(32))")
        keys = [1, 2, 9, 10, 11, 100, 18446744073709551615]  # as text, "10" < "9": the pages must follow the numbers
        cur.executemany("INSERT INTO snapshot_int_key VALUES (%s, %s)", [(k, f"k{k}") for k in keys])
        try:
            with _snapshot_connection(settings) as snap:
                schema = read_source_schema(cur, settings.mariadb.database, "snapshot_int_key")
                images = server_images(snap, schema, page_rows=2)
                assert images is not None
                read = list(images)
        finally:
            cur.execute("DROP TABLE IF EXISTS snapshot_int_key")
    assert [key for key, _, _ in read] == [(k,) for k in keys]
    assert [msgspec.json.decode(image) for _, image, _ in read] == [{"id": k, "label": f"k{k}"} for k in keys]
    assert [last for _, _, last in read] == [False] * (len(keys) - 1) + [True]


@pytest.mark.parametrize("column", ["d DATE", "dt DATETIME", "f DOUBLE", "doc JSON", "long_body LONGTEXT", "t TIME",
                                    "tags SET('a','b')", "blob_col BLOB", "y YEAR"])
def test_a_type_the_server_would_write_differently_keeps_the_row_by_row_path(settings, column):
    with connect(settings, database=settings.mariadb.database) as conn, conn.cursor() as cur:
        cur.execute("DROP TABLE IF EXISTS snapshot_json_other")
        cur.execute(f"CREATE TABLE snapshot_json_other (id INT PRIMARY KEY, {column})")
        try:
            schema = read_source_schema(cur, settings.mariadb.database, "snapshot_json_other")
            assert server_json_select(conn, schema) is None
        finally:
            cur.execute("DROP TABLE IF EXISTS snapshot_json_other")
