"""Shop dimensions at real size: millions of members and products in the source database, fast.

The seed holds 9 products and 5 members; a shop that copies this deployment has millions.
``load_dimensions`` fills ``user_member`` and ``products`` with generated rows through
``LOAD DATA LOCAL INFILE`` (one tab-separated file per chunk of a million rows), far faster
than multi-row INSERTs built in Python (docs/cdc.md). Keys are numeric
strings like the seed's, in ranges the seed does not use, so ``member_key(i)`` and
``product_key(i)`` (``loadgen.key_space``) name the i-th generated row for every other generator (the CDC benchmark's
updates, the click generator's ``uid`` and ``productId``). Loading again skips the rows that
exist (``IGNORE``): the count reports only rows added.

A running capture streams every loaded row from the binlog like any other insert; before the
capture's first run they are part of its initial snapshot instead.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pymysql

from lakehouse.errors import LakehouseError
from lakehouse.settings import Settings
from lakehouse.source_database import connect
from loadgen.key_space import MEMBER_BASE, PRODUCT_BASE, KeySpace, member_key, product_key

__all__ = ["LoadResult", "check_loaded", "load_table", "member_key", "product_key"]

CHUNK_ROWS = 1_000_000


@dataclass(frozen=True)
class LoadResult:
    table: str
    requested: int
    added: int
    seconds: float

    @property
    def rows_per_s(self) -> float:
        return self.requested / self.seconds if self.seconds else 0.0


def _member_lines(start: int, stop: int) -> str:
    themes = ("light", "dark")
    return "".join(f"{MEMBER_BASE + i}\tmember-{MEMBER_BASE + i}\t{{\"theme\":\"{themes[i % 2]}\"}}\t{1 + i % 5}\n"
                   for i in range(start, stop))


def _product_lines(start: int, stop: int) -> str:
    return "".join(f"{PRODUCT_BASE + i}\tproduct-{PRODUCT_BASE + i}\tgenerated product {i}\t{1 + (i * 37) % 99999 / 100:.4f}\n"
                   for i in range(start, stop))


TABLES = {
    "user_member": ("(userid, name, show_params, memberLevel)", _member_lines),
    "products": ("(productId, name, description, product_price)", _product_lines),
}


def load_table(settings: Settings, table: str, rows: int, database: str | None = None,
               progress: Callable[[int], None] = lambda done: None) -> LoadResult:
    """Rows 0..rows-1 of the generated ``table`` into the source database; ``progress(rows done)``."""
    columns, lines = TABLES[table]
    database = database or settings.mariadb.database
    began, added = time.monotonic(), 0
    try:
        conn = connect(settings, database=database, timeout=10, local_infile=True)
    except pymysql.err.MySQLError as exc:
        raise LakehouseError(f"cannot connect to the shop database {database!r} at {settings.mariadb.host}:"
                             f"{settings.mariadb.port}: {exc.args[-1]}. Is the stack up (`lakehouse stack up`), "
                             "and does the database exist?") from None
    with tempfile.TemporaryDirectory(prefix="lakehouse-load-") as tmp, conn, conn.cursor() as cur:
        path = Path(tmp) / f"{table}.tsv"
        for start in range(0, rows, CHUNK_ROWS):
            stop = min(rows, start + CHUNK_ROWS)
            path.write_text(lines(start, stop))
            added += cur.execute(f"LOAD DATA LOCAL INFILE %s IGNORE INTO TABLE `{table}` "
                                 f"FIELDS TERMINATED BY '\\t' ESCAPED BY '' LINES TERMINATED BY '\\n' {columns}",
                                 (str(path),))
            progress(stop)
    return LoadResult(table, rows, added, time.monotonic() - began)


def check_loaded(settings: Settings, space: KeySpace) -> None:
    """Refuse a ``loadgen.key_space.KeySpace`` the source database does not hold: clicks would name members and
    products no dimension has, and a benchmark of enrichment would measure nulls."""
    wanted = [("user_member", "userid", member_key(space.members - 1), space.members, "--members"),
              ("products", "productId", product_key(space.products - 1), space.products, "--products")]
    missing = []
    with connect(settings, database=settings.mariadb.database) as conn, conn.cursor() as cur:
        for table, key, last, count, option in wanted:
            if count and not cur.execute(f"SELECT 1 FROM `{table}` WHERE `{key}` = %s", (last,)):
                missing.append(f"{option} {count}")
    if missing:
        raise LakehouseError(f"the source database {settings.mariadb.database!r} does not hold the keys asked for; "
                             f"load them first: lakehouse load dims {' '.join(missing)}")
