"""Product and member dimensions for enrichment, as of processing time.

The dimension tables are small and change through CDC. The click job keeps a snapshot of
them as plain dictionaries in a Spark broadcast variable, and the Python task that parses
a batch also looks its events up there (``enrich_batch``): no join in the JVM plan, so a
batch's write is a projection of what the parse produced. Measured at 20,000 events a
batch, the two broadcast joins this replaces cost 0.35 s of every batch, and re-reading
the tables inside a batch 0.6 s every ``dimension_refresh_seconds`` (docs/performance.md).

So with a refresh interval the snapshot is re-read by a thread of its own and swapped in
whole; a batch takes whichever snapshot is current when it starts, and an event is
enriched with the dimension values the lakehouse held when it was processed. A failed
re-read keeps the previous snapshot and says so. With ``dimension_refresh_seconds=0``
every batch reads the tables itself (what the tests use), and after a failed batch
``invalidate`` makes the next batch read them afresh before it runs.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from decimal import Decimal

import pyarrow as pa
from pyspark import InheritableThread

from lakehouse.settings import Settings

log = logging.getLogger(__name__)

#: the columns enrichment adds to a parsed batch
ENRICHED_FIELDS = [("name", pa.string()), ("product_price", pa.decimal128(10, 4)), ("member_level", pa.int32())]


@dataclass(frozen=True)
class Dimensions:
    """productId -> (name, price) and uid -> member level, as read at ``read_at``."""

    products: dict[str, tuple[str | None, Decimal | None]] = field(default_factory=dict)
    members: dict[str, int | None] = field(default_factory=dict)
    read_at: float = 0.0


def enrich_batch(parsed: pa.RecordBatch, dims: Dimensions) -> pa.RecordBatch:
    """Append name, product_price and member_level; unknown keys (and dead letters) get nulls, as in the seed."""
    no_product = (None, None)
    products = [dims.products.get(p, no_product) if p is not None else no_product
                for p in parsed.column("productId").to_pylist()]
    levels = [dims.members.get(u) if u is not None else None for u in parsed.column("uid").to_pylist()]
    arrays = [pa.array([p[0] for p in products], pa.string()),
              pa.array([p[1] for p in products], pa.decimal128(10, 4)),
              pa.array(levels, pa.int32())]
    schema = parsed.schema
    for name, kind in ENRICHED_FIELDS:
        schema = schema.append(pa.field(name, kind))
    return pa.RecordBatch.from_arrays([*parsed.columns, *arrays], schema=schema)


class DimensionCache:
    """The current :class:`Dimensions` as a broadcast variable, refreshed off the batch's path."""

    def __init__(self, spark, settings: Settings):
        self.spark = spark
        self.settings = settings
        self.refresh_seconds = settings.pipeline.dimension_refresh_seconds
        self._lock = threading.Lock()
        self._current = None  # Broadcast[Dimensions]
        self._retired: list = []  # broadcasts a running batch may still read; unpersisted one swap later
        self._read_at = 0.0
        self._stop = threading.Event()
        self._refresher: threading.Thread | None = None

    def read(self) -> Dimensions:
        """Both tables now, to the driver (a failed read raises here, before anything is swapped)."""
        cat = self.settings.catalog
        products = self.spark.table(cat.products_table).select("productId", "name", "product_price").collect()
        members = self.spark.table(cat.members_table).select("userid", "member_level").collect()
        return Dimensions({r.productId: (r.name, r.product_price) for r in products},
                          {r.userid: r.member_level for r in members}, time.time())

    def _swap(self, dims: Dimensions) -> None:
        fresh = self.spark.sparkContext.broadcast(dims)
        with self._lock:
            self._read_at = dims.read_at
            for old in self._retired:
                old.unpersist(blocking=False)
            self._retired = [self._current] if self._current is not None else []
            self._current = fresh

    def current(self):
        """The broadcast to enrich this batch with: read now if there is none (or refreshing is per batch)."""
        with self._lock:
            current = self._current
        if current is None or self.refresh_seconds == 0:
            self._swap(self.read())
            with self._lock:
                current = self._current
        if self.refresh_seconds > 0 and self._refresher is None:
            self._start_refresher()
        return current

    def invalidate(self) -> None:
        """Drop the snapshot: the next batch reads the dimensions afresh (after a failed batch)."""
        with self._lock:
            self._current = None

    def _start_refresher(self) -> None:
        # InheritableThread: the refresher's reads stay in the job's FAIR pool
        self._refresher = InheritableThread(target=self._refresh_loop, name="dimension-refresh", daemon=True)
        self._refresher.start()

    def _refresh_loop(self) -> None:
        while not self._stop.wait(self.refresh_seconds):
            try:
                self._swap(self.read())
            except Exception as exc:  # noqa: BLE001 - keep enriching with the last snapshot; say why
                log.warning("dimension refresh failed (%s); batches keep the snapshot read %.0fs ago",
                            (str(exc).splitlines() or [""])[0][:200], time.time() - self._read_at)

    def close(self) -> None:
        self._stop.set()
        if self._refresher is not None:
            self._refresher.join(10)
