"""The initial snapshot's reads from the source: one consistent read, where the binlog stood, each table's rows.

The seam between snapshot and stream is the whole point (docs/cdc.md): the consistent read is
opened, and the binlog position and GTID set read, while ``FLUSH TABLES WITH READ LOCK``
holds, so the rows read are exactly the database at that position and streaming starts there.
Rows are streamed in key order through an unbuffered cursor on that same connection, never
held whole (a 10 M-row table is several GB as Python tuples).
"""

from __future__ import annotations

from collections.abc import Iterator

import pymysql

from lakehouse.errors import FatalError


def open_consistent_read(cur, gtid_set_query: str) -> tuple[str, int, str]:
    """Open ``cur``'s connection's consistent read; return (binlog file, position, GTID set) it is at."""
    cur.execute("SET SESSION time_zone = '+00:00'")  # TIMESTAMP values read as UTC text
    cur.execute("SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ")
    cur.execute("FLUSH TABLES WITH READ LOCK")
    try:
        cur.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT")
        file, pos = binlog_status(cur)
        cur.execute(gtid_set_query)
        gtid_set = cur.fetchone()[0] or ""
    finally:
        cur.execute("UNLOCK TABLES")
    return file, pos, gtid_set


def binlog_status(cur) -> tuple[str, int]:
    """The server's current binlog file and position (MariaDB and MySQL name the statement differently)."""
    for statement in ("SHOW BINARY LOG STATUS", "SHOW MASTER STATUS"):
        try:
            cur.execute(statement)
            row = cur.fetchone()
            return row[0], int(row[1])
        except pymysql.err.ProgrammingError:
            continue
    raise FatalError("cannot read the binlog position: is log_bin enabled? (the capture needs the binary "
                     "log: log_bin and binlog_format=ROW in the server's configuration)")


def table_rows(conn, table: str, keys: tuple[str, ...], chunk: int = 10_000) -> Iterator[tuple[list[str], tuple, bool]]:
    """(column names, row, is it the table's last) for each row of ``table`` in key order, streamed."""
    with conn.cursor(pymysql.cursors.SSCursor) as cur:
        cur.execute(f"SELECT * FROM `{table}` ORDER BY {', '.join(f'`{k}`' for k in keys)}")
        names = [d[0] for d in cur.description]
        held = None
        while rows := cur.fetchmany(chunk):
            for row in rows:
                if held is not None:
                    yield names, held, False
                held = row
        if held is not None:
            yield names, held, True
