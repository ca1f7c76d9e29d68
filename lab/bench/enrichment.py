"""`lakehouse bench enrichment`: what each way of joining clicks with real-size dimensions costs, per batch.

Issue 41 asks for a join strategy chosen by measurement. This times the candidates on the
same batches of keys, drawn as the load generator draws them (``loadgen.key_space``), against
the member table loaded by `lakehouse load dims` and captured into Iceberg:

- **whole table in memory** (today's way): read ``userid, member_level`` of the Iceberg table
  into a dictionary, as every refresh does; its seconds, the dictionary's bytes, and the bytes
  pickled to each Python worker per refresh;
- **Iceberg lookup per batch**: the batch's distinct keys joined with the table by DuckDB
  (``iceberg_scan``): every batch reads the key column of every file its keys may be in;
- **database lookup per batch** (seed 001's lookup join): the batch's distinct keys by
  primary key from the source database, with and without a bounded cache of recent keys
  (``cache_rows``, entries at most ``ttl_s`` old), as each Python worker would keep one.

Figures are medians over ``batches`` batches of ``batch_events`` keys, one process, nothing
else running: what one batch would add to the click job's Python work.
"""

from __future__ import annotations

import pickle
import random
import statistics
import time
from collections import OrderedDict
from dataclasses import dataclass

import pyarrow as pa

from lakehouse.catalog import pyiceberg_catalog
from lakehouse.settings import Settings
from lakehouse.source_database import connect
from loadgen.key_space import KeySpace
from queries.duckdb_engine import connect as duckdb_connect


@dataclass(frozen=True)
class StrategyCost:
    strategy: str
    seconds_per_batch: float  # median
    memory_mb: float  # what a process must hold for it
    note: str = ""


class LookupCache:
    """Key -> value for at most ``rows`` keys, each kept at most ``ttl_s`` (least recently used dropped first)."""

    def __init__(self, rows: int, ttl_s: float):
        self.rows, self.ttl_s = rows, ttl_s
        self._entries: OrderedDict[str, tuple[float, object]] = OrderedDict()
        self.hits = self.misses = 0

    def split(self, keys: set[str], now: float) -> tuple[dict[str, object], list[str]]:
        """(the values cached and fresh, the keys to look up)."""
        found, missing = {}, []
        for key in keys:
            entry = self._entries.get(key)
            if entry is not None and now - entry[0] <= self.ttl_s:
                self._entries.move_to_end(key)
                found[key] = entry[1]
            else:
                missing.append(key)
        self.hits += len(found)
        self.misses += len(missing)
        return found, missing

    def put(self, values: dict[str, object], now: float) -> None:
        for key, value in values.items():
            self._entries[key] = (now, value)
            self._entries.move_to_end(key)
        while len(self._entries) > self.rows:
            self._entries.popitem(last=False)


def _batches(space: KeySpace, batches: int, events: int, seed: int = 11) -> list[set[str]]:
    rng = random.Random(seed)
    return [{space.member(rng) for _ in range(events)} for _ in range(batches)]


def whole_table(s: Settings, table: str) -> StrategyCost:
    began = time.perf_counter()
    rows = pyiceberg_catalog(s).load_table(table).scan(selected_fields=("userid", "member_level")).to_arrow()
    levels = dict(zip(rows.column("userid").to_pylist(), rows.column("member_level").to_pylist(), strict=True))
    seconds = time.perf_counter() - began
    shipped = len(pickle.dumps(levels, protocol=pickle.HIGHEST_PROTOCOL))
    held = (levels.__sizeof__() + sum(k.__sizeof__() for k in levels)) / 2**20
    return StrategyCost("whole table in a dictionary, per refresh", seconds, held,
                        f"{len(levels):,} keys; {shipped / 2**20:,.0f} MiB pickled to each Python worker per refresh")


def iceberg_lookup(s: Settings, table: str, batches: list[set[str]]) -> StrategyCost:
    location = pyiceberg_catalog(s).load_table(table).metadata_location
    con = duckdb_connect(s)
    con.execute("SET threads = 1")  # one Python task's share of the machine
    times = []
    for keys in batches:
        began = time.perf_counter()
        con.register("batch_keys", pa.table({"userid": sorted(keys)}))
        con.execute(f"SELECT m.userid, m.member_level FROM iceberg_scan('{location}') m "
                    "JOIN batch_keys USING (userid)").fetchall()
        con.unregister("batch_keys")
        times.append(time.perf_counter() - began)
    return StrategyCost("Iceberg lookup per batch (DuckDB, one thread)", statistics.median(times), 0.0)


def database_lookup(s: Settings, batches: list[set[str]], cache: LookupCache | None,
                    interval_s: float) -> StrategyCost:
    times = []
    with connect(s, user=s.mariadb.app_user, database=s.mariadb.database) as conn, conn.cursor() as cur:
        for n, keys in enumerate(batches):
            now = n * interval_s  # batches a trigger apart: what a TTL sees
            began = time.perf_counter()
            found, missing = cache.split(keys, now) if cache else ({}, sorted(keys))
            fetched = {}
            for start in range(0, len(missing), 1000):
                part = missing[start:start + 1000]
                cur.execute("SELECT userid, memberLevel FROM user_member WHERE userid IN ("
                            + ",".join(["%s"] * len(part)) + ")", part)
                fetched.update(cur.fetchall())
            if cache:
                cache.put({k: fetched.get(k) for k in missing}, now)
            times.append(time.perf_counter() - began)
    if cache is None:
        return StrategyCost("database lookup per batch, no cache", statistics.median(times), 0.0)
    hit = cache.hits / max(cache.hits + cache.misses, 1)
    return StrategyCost(f"database lookup per batch, cache of {cache.rows:,} keys, TTL {cache.ttl_s:g} s",
                        statistics.median(times), cache.rows * 200 / 2**20, f"hit ratio {hit:.0%}")


def run(settings: Settings, space: KeySpace, table: str, batches: int = 30, batch_events: int = 10_000,
        cache_rows: int = 200_000, ttl_s: float = 10.0, interval_s: float = 1.0) -> list[StrategyCost]:
    keys = _batches(space, batches, batch_events)
    return [whole_table(settings, table),
            iceberg_lookup(settings, table, keys[:5]),
            database_lookup(settings, keys, None, interval_s),
            database_lookup(settings, keys, LookupCache(cache_rows, ttl_s), interval_s)]
