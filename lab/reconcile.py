"""Do the Iceberg dimension tables hold exactly what the source database holds?

The CDC path's end-to-end proof, used by the CDC tests and the chaos suite: both sides
are read in one canonical form (update times as epoch milliseconds in UTC, prices as
decimal strings) and compared row by row, or by one checksum.
"""

from __future__ import annotations

import hashlib
import time

from lab.time_limit import Stopped, within_limit
from lakehouse.settings import Settings
from pipeline.capture.connector import cdc_connection

Rows = dict[str, list[tuple]]


def source_rows(s: Settings) -> Rows:
    """Every product and member row in the source database, canonical form."""
    with cdc_connection(s) as conn, conn.cursor() as cur:
        cur.execute("SET time_zone = '+00:00'")
        cur.execute("SELECT productId, name, description, CAST(product_price AS CHAR), "
                    "CAST(ROUND(UNIX_TIMESTAMP(update_time) * 1000) AS SIGNED) FROM products ORDER BY 1")
        products = [tuple(r) for r in cur.fetchall()]
        cur.execute("SELECT userid, name, show_params, memberLevel, "
                    "CAST(ROUND(UNIX_TIMESTAMP(update_time) * 1000) AS SIGNED) FROM user_member ORDER BY 1")
        members = [tuple(r) for r in cur.fetchall()]
    return {"products": products, "user_member": members}


def lake_rows(spark, s: Settings) -> Rows:
    """The same rows read from the Iceberg dimension tables (empty while a table does not exist yet)."""
    out: Rows = {"products": [], "user_member": []}
    if spark.catalog.tableExists(s.catalog.products_table):
        out["products"] = [tuple(r) for r in spark.sql(
            f"SELECT productId, name, description, CAST(product_price AS STRING), unix_millis(update_time) "
            f"FROM {s.catalog.products_table} ORDER BY 1").collect()]
    if spark.catalog.tableExists(s.catalog.members_table):
        out["user_member"] = [tuple(r) for r in spark.sql(
            f"SELECT userid, name, show_params, member_level, unix_millis(update_time) "
            f"FROM {s.catalog.members_table} ORDER BY 1").collect()]
    return out


def trino_rows(s: Settings) -> Rows:
    """The same rows as Trino reads them: a reader that shares no code with Spark or the pipeline."""
    # deferred: the trino client, only for the checks that read through Trino
    from queries.trino_engine import TrinoEngine

    engine, millis = TrinoEngine(s), "CAST(round(to_unixtime(update_time) * 1000) AS BIGINT)"
    products = engine.run(f"SELECT productId, name, description, CAST(product_price AS VARCHAR), {millis} "
                          f"FROM {s.catalog.products_table} ORDER BY 1")
    members = engine.run(f"SELECT userid, name, show_params, member_level, {millis} "
                         f"FROM {s.catalog.members_table} ORDER BY 1")
    return {"products": [tuple(r.values()) for r in products.to_pylist()],
            "user_member": [tuple(r.values()) for r in members.to_pylist()]}


def checksum(rows: Rows) -> str:
    return hashlib.sha256(repr(sorted(rows.items())).encode()).hexdigest()


def differences(source: Rows, lake: Rows) -> dict[str, set[tuple]]:
    """Rows present on one side only, per table (empty sets: equal)."""
    return {t: set(source[t]) ^ set(lake.get(t, [])) for t in source}


def wait_until_equal(spark, s: Settings, timeout: float, drain=None) -> float:
    """Seconds until the Iceberg dimensions equal the source tables (drain() advances the apply).

    Raises AssertionError naming the differing rows when ``timeout`` passes first.
    """
    began = time.monotonic()
    while time.monotonic() - began < timeout:
        if drain:
            drain()
        if lake_rows(spark, s) == source_rows(s):
            return time.monotonic() - began
        time.sleep(0.3)
    diff = differences(source_rows(s), lake_rows(spark, s))
    raise AssertionError(f"dimensions differ after {timeout:.0f}s: {diff}")


#: one row per reader over the whole member table: rows, and sums over the keys and every value a change sets
#: (no count(DISTINCT): on 10 M keys it needs more than Trino's 512 MB per node; a doubled row moves the count)
_FINGERPRINT = ("SELECT count(*) AS n, sum(length(userid)) AS keys, sum(member_level) AS levels, "
                "sum(CASE WHEN show_params LIKE 'bench:%' THEN CAST(substr(show_params, 7) AS BIGINT) ELSE 0 END) "
                "AS marks, sum(length(name)) AS names FROM {table}")


def member_fingerprints(s: Settings, engines: tuple[str, ...]) -> dict[str, tuple]:
    """The member table's fingerprint from MariaDB and each engine (equal tuples: the same rows, at scale).

    Reading 10 M rows into Python per reader to compare them row by row would take minutes and
    gigabytes; a lost or doubled row changes the count, a missed update or a row brought back
    changes a sum (each benchmark change writes a distinct ``bench:<ms>`` mark).
    """
    out: dict[str, tuple] = {}
    with cdc_connection(s) as conn, conn.cursor() as cur:
        cur.execute("SELECT COUNT(*), SUM(CHAR_LENGTH(userid)), SUM(memberLevel), SUM(CASE WHEN show_params LIKE "
                    "'bench:%' THEN CAST(SUBSTR(show_params, 7) AS SIGNED) ELSE 0 END), SUM(CHAR_LENGTH(name)) "
                    "FROM user_member")
        out["mariadb"] = tuple(int(v or 0) for v in cur.fetchone())
    for name, rows in _each_engine(s, engines, _FINGERPRINT.format(table=s.catalog.members_table)):
        out[name] = tuple(v if isinstance(v, str) else int(v or 0) for v in rows[0].values())
    return out


def member_sample_differences(s: Settings, keys: list[str], engines: tuple[str, ...]) -> dict[str, int]:
    """Rows of ``keys`` that differ between MariaDB and each engine (0: the same)."""
    if not keys:
        return {}
    listed = ", ".join(f"'{k}'" for k in keys)
    with cdc_connection(s) as conn, conn.cursor() as cur:
        cur.execute(f"SELECT userid, name, show_params, memberLevel FROM user_member WHERE userid IN ({listed})")
        source = {tuple(r) for r in cur.fetchall()}
    sql = f"SELECT userid, name, show_params, member_level FROM {s.catalog.members_table} WHERE userid IN ({listed})"
    return {name: -1 if rows and "error" in rows[0] else len(source ^ {tuple(r.values()) for r in rows})
            for name, rows in _each_engine(s, engines, sql)}


#: seconds one engine's reading of the table may take (a Spark session starts in it) before it is stopped
ENGINE_LIMIT_S = 300.0


def _each_engine(s: Settings, engines: tuple[str, ...], sql: str):
    """(engine, rows as dicts) of ``sql`` (Trino SQL) on each engine; Trino is started if the local stack runs.
    Each engine reads in a process of its own, stopped after ``ENGINE_LIMIT_S`` (``lab.time_limit``); a reader
    that failed or was stopped gives one row ``{"error": why}``."""
    for name in engines:
        if name == "trino":
            # deferred: the stack's Trino, started if stopped, only when asked for
            from deploy.local.stack import LocalStack

            LocalStack(s).ensure("trino")
        rows = within_limit(_engine_rows, name, s, sql, limit_s=ENGINE_LIMIT_S)
        yield name, [{"error": rows}] if isinstance(rows, Stopped) else rows


def _engine_rows(name: str, s: Settings, sql: str) -> list[dict]:
    # deferred: each engine loads only in the process that reads with it
    from queries.engines import open_engine

    engine = open_engine(name, s)
    try:
        return engine.run(sql).to_pylist()
    finally:
        close = getattr(engine, "close", None)
        if close:
            close()
