"""`lakehouse bench visibility` on the real catalog: every snapshot committed while it watches is seen once."""

from __future__ import annotations

import threading
import time
import uuid

import pyarrow as pa

from lab.bench.scratch import discard
from lab.bench.visibility import measure
from lakehouse.catalog import pyiceberg_catalog


def test_each_snapshot_committed_while_watching_is_seen_once_after_its_commit(settings):
    table = f"bench.visibility_{uuid.uuid4().hex[:8]}"
    catalog = pyiceberg_catalog(settings)
    catalog.create_namespace_if_not_exists("bench")
    iceberg = catalog.create_table(table, pa.schema([("k", pa.string())]))
    iceberg.append(pa.table({"k": ["before"]}))  # there before the watch: not measured
    found = []
    watcher = threading.Thread(target=lambda: found.append(measure(settings, table, seconds=6, interval=0.05)))
    try:
        watcher.start()
        time.sleep(1)
        for n in range(3):
            iceberg.append(pa.table({"k": [f"row {n}"]}))
            iceberg.append(pa.table({"k": [f"row {n} again"]}))  # two commits between two loads may be seen at once
            time.sleep(0.7)
        watcher.join(30)
    finally:
        discard(settings, [table], [])
    (seen,) = found
    assert seen.snapshots == 6, seen
    assert 0 <= seen.lag_p50_s <= seen.lag_p95_s <= seen.lag_p99_s <= seen.lag_max_s, seen
    assert seen.loads > 10 and seen.load_median_s > 0
