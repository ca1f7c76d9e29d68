"""The initial snapshot's reads from the source: one consistent read, where the binlog stood, each table's rows.

The seam between snapshot and stream is the whole point (docs/cdc.md): the consistent read is
opened, and the binlog position and GTID set read, while ``FLUSH TABLES WITH READ LOCK``
holds, so the rows read are exactly the database at that position and streaming starts there.
Rows are streamed in key order through an unbuffered cursor on that same connection, never
held whole (a 10 M-row table is several GB as Python tuples).

Where every column is of a type whose JSON the server writes exactly as the capture would
(``server_json_select``), the server builds each row's after-image (``JSON_OBJECT``) and the
capture reads two columns a row, the key and that text, not every field: reading rows in
PyMySQL was 38 % of the capture's time and encoding the images 25 % (py-spy, 2 M-row snapshot).

Where the key is one integer or text column, the server goes further and builds a **page** of
rows as one value (``server_images``): PyMySQL then reads one result row per 10,000 table rows,
and the capture splits the page's lines. Reading two fields a row was still ~40 % of the
capture's CPU; in a 10 M-row snapshot pages took the capture from 79 to 46 CPU-seconds and the
server from 30 to 46, 16 less between them on a machine of two cores (docs/cdc.md).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import msgspec
import pymysql

from lakehouse.errors import FatalError
from pipeline.capture.source_schema import INTEGER_BITS, SourceSchema


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
    yield from _rows(conn, f"SELECT * FROM `{_name(table)}` ORDER BY {_order(keys)}", chunk)


def json_rows(conn, select: str, chunk: int = 10_000) -> Iterator[tuple[list[str], tuple, bool]]:
    """Like ``table_rows`` for a ``server_json_select``: each row is (key values..., after-image JSON bytes)."""
    yield from _rows(conn, select, chunk)


def _rows(conn, select: str, chunk: int) -> Iterator[tuple[list[str], tuple, bool]]:
    with conn.cursor(pymysql.cursors.SSCursor) as cur:
        cur.execute(select)
        names = [d[0] for d in cur.description]
        held = None
        while rows := cur.fetchmany(chunk):
            for row in rows:
                if held is not None:
                    yield names, held, False
                held = row
        if held is not None:
            yield names, held, True


#: text types the server and PyMySQL both give as the column's characters (SET is a Python set in
#: PyMySQL, TIME a timedelta; LONGTEXT is also MariaDB's JSON, which JSON_OBJECT would nest as a
#: document, not quote as text: those tables take the row-by-row path)
_TEXT = {"char", "varchar", "tinytext", "text", "mediumtext", "enum"}


def _json_value(column) -> str | None:
    """The SQL giving ``column``'s after-image value as ``envelope.SnapshotEnvelopes`` writes it, or None."""
    name = f"`{_name(column.name)}`"
    kind = column.data_type
    if (kind in INTEGER_BITS and kind != "year") or kind in _TEXT:
        return name  # a JSON number, a JSON string
    if kind in ("decimal", "numeric"):
        return f"CAST({name} AS CHAR)"  # the exact decimal text, all its scale's digits, as PyMySQL reads it
    if kind == "timestamp":  # UTC (the session's time zone), milliseconds, "Z": envelope._timestamp_text
        return f"CONCAT(DATE_FORMAT({name}, '%Y-%m-%dT%H:%i:%s.'), LEFT(DATE_FORMAT({name}, '%f'), 3), 'Z')"
    return None


def server_json_select(conn, schema: SourceSchema) -> str | None:
    """A SELECT of ``schema``'s table giving, in key order, its key columns and then each row's after-image as
    JSON bytes built by the server; None when a column's type needs the capture's own conversion."""
    values = [_json_value(c) for c in schema.columns]
    if any(v is None for v in values):
        return None
    pairs = ", ".join(f"{conn.escape(c.name)}, {v}" for c, v in zip(schema.columns, values, strict=True))
    keys = ", ".join(f"`{_name(k)}`" for k in schema.key)
    return (f"SELECT {keys}, CAST(JSON_OBJECT({pairs}) AS BINARY) FROM `{_name(schema.table)}` "
            f"ORDER BY {_order(schema.key)}")


#: table rows a page holds, and the longest page the server may build (``group_concat_max_len``, at most half the
#: server's ``max_allowed_packet``): a page that reaches it may be cut, and is read again row by row
PAGE_ROWS = 10_000
PAGE_BYTES = 8 << 20

Image = tuple[tuple, bytes | None, bool]  # (key values, after-image JSON (None: the capture builds it), is it the last row)


def server_images(conn, schema: SourceSchema, page_rows: int = PAGE_ROWS) -> Iterator[Image] | None:
    """Each row's key values and server-built after-image, in key order, with the last row marked; None when
    a column's type needs the capture's own conversion (``server_json_select``).

    A one-column integer or text key is read a page at a time, where the last key read bounds the next page
    (``WHERE key > last``, the primary key's own order): one result row and one field a page.
    """
    select = server_json_select(conn, schema)
    if select is None:
        return None
    width = len(schema.key)
    kind = next(c.data_type for c in schema.columns if c.name == schema.key[0])
    if width != 1 or not ((kind in INTEGER_BITS and kind != "year") or kind in _TEXT):
        return _marked((values[:width], values[width]) for _, values, _ in json_rows(conn, select))
    return _marked(_paged(conn, schema, kind in INTEGER_BITS, page_rows))


def _marked(images: Iterable[tuple[tuple, bytes]]) -> Iterator[Image]:
    """``images`` with the last one marked (known once the next is missing)."""
    held = None
    for image in images:
        if held is not None:
            yield held[0], held[1], False
        held = image
    if held is not None:
        yield held[0], held[1], True


def _paged(conn, schema: SourceSchema, integer_key: bool, page_rows: int) -> Iterator[tuple[tuple, bytes]]:
    key = f"`{_name(schema.key[0])}`"
    key_json = key if integer_key else f"JSON_QUOTE({key})"
    pairs = ", ".join(f"{conn.escape(c.name)}, {_json_value(c)}" for c in schema.columns)
    line = f"CONCAT({key_json}, '\\t', JSON_OBJECT({pairs}))"  # neither JSON text holds a raw tab or line break
    rows = f"SELECT {key}, {line} AS line FROM `{_name(schema.table)}` WHERE_CLAUSE ORDER BY {key} LIMIT {page_rows}"
    # PyMySQL formats with %: the SQL's own % (DATE_FORMAT's) doubled, then the bound's placeholder put in
    page = f"SELECT COUNT(*), MAX({key}), CAST(GROUP_CONCAT(line SEPARATOR '\\n') AS BINARY) FROM ({rows}) AS page"
    page = page.replace("%", "%%")
    one_by_one = f"SELECT {key}, CAST(line AS BINARY) FROM ({rows}) AS page".replace("%", "%%")
    decode = msgspec.json.decode
    with conn.cursor() as cur:
        cur.execute("SELECT @@max_allowed_packet")
        longest = min(PAGE_BYTES, int(cur.fetchone()[0]) // 2)
        cur.execute(f"SET SESSION group_concat_max_len = {longest}")
        last = None
        while True:
            where, bound_args = ("", ()) if last is None else (f"WHERE {key} > %s", (last,))
            cur.execute(page.replace("WHERE_CLAUSE", where), bound_args)
            count, bound, text = cur.fetchone()
            if not count:
                return
            if text is None or len(text) >= longest:  # cut at the bound (or refused): this page row by row
                cur.execute(one_by_one.replace("WHERE_CLAUSE", where), bound_args)
                lines = [line for _, line in cur.fetchall()]
            else:
                lines = text.split(b"\n")
            if len(lines) != count:
                raise FatalError(f"the snapshot page of {schema.table} after key {last!r} held {len(lines)} rows, "
                                 f"the server counted {count}")
            for row in lines:
                key_text, image = row.split(b"\t", 1)
                yield (decode(key_text),), image
            if count < page_rows:
                return
            last = bound


def _name(identifier: str) -> str:
    return identifier.replace("`", "``")


def _order(keys: tuple[str, ...]) -> str:
    return ", ".join(f"`{_name(k)}`" for k in keys)
