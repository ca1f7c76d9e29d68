"""Dimensions too large to hold whole: each batch looks its keys up in the source database, through a bounded cache.

Seed 001's lookup join (``lookup.cache.max-rows``, ``lookup.cache.ttl``), chosen by measurement
against the alternatives (``lakehouse bench enrichment``, 10 M members, batches of 10,000 keys,
docs/performance.md):

- the whole table in a dictionary, as for the seed's tables: seconds to read at each refresh,
  hundreds of MiB held, and a large pickle sent to every Python worker each time;
- the batch's keys joined with the Iceberg table (DuckDB): changes land on random keys, so
  every file spans the whole key range and each batch reads every row group;
- the keys by primary key from the source database (the fastest by far, as long as its page
  cache, ``mariadb.buffer_pool_mb``, holds the table).

Each Python worker keeps one connection and one cache per dimension (``KeyLookup``): at most
``cache_rows`` keys, each at most ``ttl_s`` old, unknown keys included (a tenth of the seed's
members are unknown), so a value a click is enriched with is never older than the refresh
interval, and no process holds more of the table than its cache.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass, field

import pymysql
from cachetools import TTLCache

from lakehouse.errors import TransientError
from lakehouse.source_database import open_connection

#: keys asked in one statement
CHUNK = 1_000


class LookupUnavailable(TransientError):
    """The source database did not answer a lookup: the batch fails and is retried (nothing is enriched wrong)."""


@dataclass(frozen=True)
class LookupSpec:
    """What a Python worker needs to look keys up; travels in the broadcast, so it holds plain values."""

    host: str
    port: int
    user: str
    password: str = field(repr=False)
    database: str
    table: str
    key: str
    columns: tuple[str, ...]
    cache_rows: int
    ttl_s: float


class KeyLookup:
    """One dimension's lookups in one process: a connection, opened on first use, and a TTL-bounded LRU cache."""

    def __init__(self, spec: LookupSpec):
        self.spec = spec
        self.cache: TTLCache | None = (TTLCache(maxsize=spec.cache_rows, ttl=spec.ttl_s)
                                       if spec.cache_rows > 0 and spec.ttl_s > 0 else None)
        self._conn: pymysql.connections.Connection | None = None
        self._lock = threading.Lock()  # the driver enriches an evolving batch itself, beside the workers' tasks

    def values(self, keys: Iterable[str]) -> dict[str, tuple | None]:
        """Each key's columns (None for a key the table does not hold)."""
        with self._lock:
            found: dict[str, tuple | None] = {}
            missing = []
            for key in set(keys):
                if self.cache is None:
                    missing.append(key)
                    continue
                try:
                    found[key] = self.cache[key]
                except KeyError:  # not cached, or expired just now: `in` then [ ] (cachetools' get) races the TTL
                    missing.append(key)
            fetched = self._fetch(missing) if missing else {}
            for key in missing:
                value = fetched.get(key)
                found[key] = value
                if self.cache is not None:
                    self.cache[key] = value
            return found

    def _fetch(self, keys: list[str]) -> dict[str, tuple]:
        s = self.spec
        columns = ", ".join(f"`{c}`" for c in (s.key, *s.columns))
        out: dict[str, tuple] = {}
        for attempt in (1, 2):  # a connection the server closed (idle timeout, restart) is opened again once
            try:
                with self._connection().cursor() as cur:
                    for start in range(0, len(keys), CHUNK):
                        part = keys[start:start + CHUNK]
                        cur.execute(f"SELECT {columns} FROM `{s.table}` WHERE `{s.key}` IN "
                                    f"({', '.join(['%s'] * len(part))})", part)
                        out.update((str(row[0]), tuple(row[1:])) for row in cur.fetchall())
                return out
            except pymysql.err.OperationalError as exc:
                self._close()
                if attempt == 2:
                    raise LookupUnavailable(f"looking up {len(keys):,} keys in {s.database}.{s.table} at "
                                            f"{s.host}:{s.port} failed: {exc}") from exc
        return out

    def _connection(self) -> pymysql.connections.Connection:
        if self._conn is None:
            s = self.spec
            self._conn = open_connection(host=s.host, port=s.port, user=s.user, password=s.password,
                                         database=s.database, read_timeout=30)
        return self._conn

    def _close(self) -> None:
        if self._conn is not None:
            try:
                self._conn.close()
            except pymysql.err.Error:
                pass
            self._conn = None


_LOOKUPS: dict[LookupSpec, KeyLookup] = {}
_LOOKUPS_LOCK = threading.Lock()


def lookup(spec: LookupSpec, keys: Iterable[str]) -> dict[str, tuple | None]:
    """``keys`` looked up through this process's ``KeyLookup`` for ``spec`` (made on first use)."""
    with _LOOKUPS_LOCK:
        found = _LOOKUPS.get(spec)
        if found is None:
            found = _LOOKUPS[spec] = KeyLookup(spec)
    return found.values(keys)


def source_rows(spec: LookupSpec) -> int:
    """The database's estimate of the rows in the spec's table (InnoDB's statistics: no scan)."""
    with open_connection(host=spec.host, port=spec.port, user=spec.user, password=spec.password,
                         read_timeout=10) as conn, conn.cursor() as cur:
        cur.execute("SELECT TABLE_ROWS FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s",
                    (spec.database, spec.table))
        row = cur.fetchone()
    return int(row[0] or 0) if row else 0
