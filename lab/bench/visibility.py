"""How long after its commit a new reader first sees each snapshot of a table (`lakehouse bench visibility`).

A writer's freshness figures count to the commit: the snapshot's own timestamp, set when the
writer builds it, before the manifest list, the metadata file and the metastore's swap that
publishes it. A reader (Trino, DuckDB, PyIceberg) sees a snapshot only once it loads the
table after that swap. This loads the table afresh through the catalog every ``interval``
seconds, as such a reader would, and records for every snapshot of the current lineage the
time of the first load that returned it, less the snapshot's timestamp: the visibility lag.
It is an upper bound (the lag plus up to one interval of polling plus the load itself), so a
writer's freshness to the commit plus this lag bounds its freshness as a reader sees it.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass

from pyiceberg.table.snapshots import ancestors_of

from lakehouse.catalog import pyiceberg_catalog
from lakehouse.settings import Settings


@dataclass(frozen=True)
class Visibility:
    snapshots: int  # snapshots first seen during the run
    loads: int
    lag_p50_s: float
    lag_p95_s: float
    lag_p99_s: float
    lag_max_s: float
    load_median_s: float  # one fresh load of the table: what each reader pays before it sees anything


def _quantile(ordered: list[float], share: float) -> float:
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def measure(settings: Settings, table: str, seconds: float, interval: float = 0.1) -> Visibility:
    """Poll ``table`` for ``seconds``; the lag of every snapshot committed meanwhile."""
    catalog = pyiceberg_catalog(settings)
    known: set[int] = set()
    current = catalog.load_table(table)
    if current.current_snapshot() is not None:  # what was there before the run is not measured
        known.update(s.snapshot_id for s in current.snapshots())
    lags, loads = [], []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        began = time.monotonic()
        loaded = catalog.load_table(table)
        seen_ms = time.time() * 1000
        loads.append(time.monotonic() - began)
        head = loaded.current_snapshot()
        for snapshot in ancestors_of(head, loaded.metadata) if head is not None else ():
            if snapshot.snapshot_id in known:
                break
            known.add(snapshot.snapshot_id)
            lags.append((seen_ms - snapshot.timestamp_ms) / 1000)
        time.sleep(max(0.0, interval - (time.monotonic() - began)))
    if not lags:
        raise RuntimeError(f"no snapshot of {table} was committed in {seconds:.0f}s: is its writer running?")
    ordered = sorted(lags)
    return Visibility(len(lags), len(loads), _quantile(ordered, 0.5), _quantile(ordered, 0.95),
                      _quantile(ordered, 0.99), ordered[-1], statistics.median(loads))
