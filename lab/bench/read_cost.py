"""What a reader pays to read a CDC benchmark's member table: a point query and a full count, per reader.

The same table costs each reader differently: DuckDB and Trino apply position and equality
deletes as they scan, PyIceberg applies position deletes and refuses equality deletes. A run
reads the table through each at its end, and through DuckDB while it changes (whether the cost
levels off). Each reader's measurement runs in a process of its own with a time limit
(``lab.time_limit``): a reader that takes minutes is reported as stopped, not waited for.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass

from lab.bench.freshness import quantiles
from lab.time_limit import Stopped, within_limit
from lakehouse.catalog import pyiceberg_catalog
from lakehouse.settings import Settings
from loadgen.dimensions import member_key
from pipeline.lake_writer.live_rows import live_files
from queries.duckdb_engine import DuckDBEngine


@dataclass(frozen=True)
class ReadCost:
    """p95 seconds of a point query and of a full count, and the delete files readers merge, at one moment."""

    point_p95_s: float
    count_p95_s: float
    delete_files: int
    deleted_rows: int = 0


def read_cost(s: Settings, members: int, repeat: int = 10) -> ReadCost | Stopped:
    """A point query on a random key and a full count through DuckDB, ``repeat`` times each (a warm engine),
    within ``lab.time_limit.READ_LIMIT_S``; or why there is no figure (DuckDB cannot read the table, or not in time)."""
    return within_limit(_duckdb_read_cost, s, members, repeat)


def _duckdb_read_cost(s: Settings, members: int, repeat: int) -> ReadCost:
    engine, rng, table = DuckDBEngine(s), random.Random(3), s.catalog.members_table
    point, count = [], []
    engine.run(f"SELECT count(*) FROM {table}")  # the connection and the metadata read: not the read cost
    for _ in range(repeat):
        began = time.perf_counter()
        engine.run(f"SELECT * FROM {table} WHERE userid = '{member_key(rng.randrange(members))}'")
        point.append(time.perf_counter() - began)
        began = time.perf_counter()
        engine.run(f"SELECT count(*) FROM {table}")
        count.append(time.perf_counter() - began)
    deletes = _delete_files(s)
    return ReadCost(quantiles(point, (95,))[0], quantiles(count, (95,))[0], len(deletes),
                    sum(f.record_count for f in deletes))


def _delete_files(s: Settings) -> list:
    files = [e.data_file for e in live_files(pyiceberg_catalog(s).load_table(s.catalog.members_table))]
    return [f for f in files if f.content != 0]


#: seconds a reader's repeated query may take in all before the run stops repeating it
READER_BUDGET_S = 30.0
#: the readers whose cost on the table a run reports at its end: each reads it its own way (``reader_costs``)
READERS = ("duckdb", "trino", "pyiceberg")


def _timed(call: Callable[[], object], repeat: int, budget_s: float = READER_BUDGET_S) -> float:
    """p95 seconds of ``call`` over up to ``repeat`` calls after a first, unmeasured one (connections, metadata);
    fewer once ``budget_s`` is spent, and the first alone when it took a third of that (a reader that takes
    minutes a query is measured once, not ``repeat`` times: its connection is not what it costs)."""
    began = time.perf_counter()
    call()
    first = time.perf_counter() - began
    if first > budget_s / 3:
        return first
    seconds: list[float] = []
    spent = time.perf_counter()
    while len(seconds) < repeat and (not seconds or time.perf_counter() - spent < budget_s):
        began = time.perf_counter()
        call()
        seconds.append(time.perf_counter() - began)
    return quantiles(seconds, (95,))[0]


def _reader(name: str, s: Settings) -> tuple[Callable[[str], object], Callable[[], object], Callable[[], None]]:
    """(a point query of a key, a full count, close) on reader ``name``: an engine of ``queries``, or PyIceberg's scan."""
    table = s.catalog.members_table
    if name == "pyiceberg":
        # deferred: PyIceberg's expressions, only for this reader
        from pyiceberg.expressions import EqualTo

        loaded = pyiceberg_catalog(s).load_table(table)
        return (lambda key: loaded.scan(row_filter=EqualTo("userid", key)).to_arrow(), lambda: loaded.scan().count(),
                lambda: None)
    # deferred: each engine's client loads only here, at the end of a run
    from queries.engines import open_engine

    if name == "trino":
        # deferred: the stack's Trino, started if stopped
        from deploy.local.stack import LocalStack

        LocalStack(s).ensure("trino")
    engine = open_engine(name, s)
    return (lambda key: engine.run(f"SELECT * FROM {table} WHERE userid = '{key}'"),
            lambda: engine.run(f"SELECT count(*) FROM {table}"), getattr(engine, "close", lambda: None))


def reader_costs(s: Settings, members: int, repeat: int = 5) -> dict[str, ReadCost | Stopped]:
    """What each of ``READERS`` pays to read the member table now: point query p95, full count p95 (seconds),
    or why there is no figure: the reader cannot read the table (PyIceberg does not apply equality deletes: it
    raises), or not within ``lab.time_limit.READ_LIMIT_S``."""
    out: dict[str, ReadCost | Stopped] = {}
    for name in READERS:
        cost = within_limit(_reader_cost, name, s, members, repeat)
        failed = isinstance(cost, Stopped) and cost.startswith("failed: ")
        out[name] = Stopped("cannot read it: " + cost.removeprefix("failed: ")) if failed else cost
    return out


def _reader_cost(name: str, s: Settings, members: int, repeat: int) -> ReadCost:
    rng, deletes = random.Random(3), _delete_files(s)
    point, count, close = _reader(name, s)
    try:
        return ReadCost(_timed(lambda: point(member_key(rng.randrange(members))), repeat), _timed(count, repeat),
                        len(deletes), sum(f.record_count for f in deletes))
    finally:
        close()
