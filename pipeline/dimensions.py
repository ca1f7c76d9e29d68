"""Product and member dimensions for enrichment, as of processing time.

The dimension tables are small and change through CDC. The click job keeps a snapshot of
them as plain dictionaries in a Spark broadcast variable, and the Python task that parses
a batch also looks its events up there (``enrich_batch``): no join in the JVM plan, so a
batch's write is a projection of what the parse produced. Two broadcast joins in the plan,
and re-reading the tables inside a batch, cost more of every batch (docs/performance.md).

So with a refresh interval the snapshot is re-read by a thread of its own and swapped in
whole; a batch takes whichever snapshot is current when it starts, and an event is
enriched with the dimension values the lakehouse held when it was processed. A failed
re-read keeps the previous snapshot and says so. With ``dimension_refresh_seconds=0``
every batch reads the tables itself (what the tests use), and after a failed batch
``invalidate`` makes the next batch read them afresh before it runs.

A dimension whose source table holds more than ``dimension_lookup_rows`` rows (a real shop's
members) is not read whole: the snapshot carries a ``LookupSpec`` instead, and each batch looks
its keys up in the source database through a bounded cache (``pipeline.dimension_lookup``).
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pymysql
from pyspark import InheritableThread

from lakehouse.catalog import pyiceberg_catalog
from lakehouse.settings import Settings, secret
from pipeline.dimension_lookup import LookupSpec, lookup, source_rows

log = logging.getLogger(__name__)

#: the columns enrichment adds to a parsed batch
ENRICHED_FIELDS = [("name", pa.string()), ("product_price", pa.decimal128(10, 4)), ("member_level", pa.int32())]


@dataclass(frozen=True)
class Dimensions:
    """productId -> (name, price) and uid -> (member level,), as read at ``read_at``; a dimension too large to
    hold is a ``LookupSpec`` instead, looked up per batch."""

    products: dict[str, tuple] | LookupSpec = field(default_factory=dict)
    members: dict[str, tuple] | LookupSpec = field(default_factory=dict)
    read_at: float = 0.0


def _values(dimension: dict[str, tuple] | LookupSpec, keys: list) -> dict:
    """The dimension's values for ``keys``: the held dictionary itself, or the batch's keys looked up."""
    if isinstance(dimension, dict):
        return dimension
    return lookup(dimension, (k for k in keys if k is not None))


def enrich_batch(parsed: pa.RecordBatch, dims: Dimensions) -> pa.RecordBatch:
    """Append name, product_price and member_level; unknown keys (and dead letters) get nulls, as in the seed."""
    product_ids, uids = parsed.column("productId").to_pylist(), parsed.column("uid").to_pylist()
    products, members = _values(dims.products, product_ids), _values(dims.members, uids)
    found = [products.get(p) if p is not None else None for p in product_ids]
    levels = [members.get(u) if u is not None else None for u in uids]
    arrays = [pa.array([p[0] if p else None for p in found], pa.string()),
              pa.array([p[1] if p else None for p in found], pa.decimal128(10, 4)),
              pa.array([m[0] if m else None for m in levels], pa.int32())]
    schema = parsed.schema
    for name, kind in ENRICHED_FIELDS:
        schema = schema.append(pa.field(name, kind))
    return pa.RecordBatch.from_arrays([*parsed.columns, *arrays], schema=schema)


@dataclass(frozen=True)
class Held:
    """A snapshot handed out as a broadcast is (``.value``), in a job that has no Spark to broadcast it."""

    value: Dimensions

    def unpersist(self, blocking: bool = False) -> None:
        """Nothing to free: the snapshot goes when the last batch holding it does."""


class DimensionCache:
    """The current :class:`Dimensions` as a broadcast variable, refreshed off the batch's path."""

    def __init__(self, spark, settings: Settings):
        self.spark = spark  # None in a job without Spark: the snapshot is then held as it is, not broadcast
        self.settings = settings
        self._catalog: Any = None  # PyIceberg's, made on first use when there is no Spark
        self.refresh_seconds = settings.pipeline.dimension_refresh_seconds
        self._lock = threading.Lock()
        self._current: Any = None  # Broadcast[Dimensions], or Held without Spark
        self._retired: list = []  # broadcasts a running batch may still read; unpersisted one swap later
        self._read_at = 0.0
        self._stop = threading.Event()
        self._refresher: threading.Thread | None = None
        self._lookups: dict[str, bool] = {}  # source table -> looked up (vs read whole), as last decided
        self._unsized: set[str] = set()  # tables whose size the database did not give at the last refresh

    def read(self) -> Dimensions:
        """Both dimensions now, to the driver (a failed read raises here, before anything is swapped): a small one
        read whole from the lake, a large one as the spec of its lookups."""
        product, member = self.settings.table("products"), self.settings.table("members")
        assert product.source and product.key and member.source and member.key  # declared in the registry
        level = {lake: source for source, lake in member.renames.items()}.get("member_level", "member_level")
        products: dict[str, tuple] | LookupSpec | None = self._large(product.source, product.key,
                                                                     ("name", "product_price"))
        if products is None:
            products = {key: (name, price) for key, name, price in
                        self._rows(product.table, (product.key, "name", "product_price"))}
        members: dict[str, tuple] | LookupSpec | None = self._large(member.source, member.key, (level,))
        if members is None:
            members = {key: (lvl,) for key, lvl in self._rows(member.table, (member.key, "member_level"))}
        return Dimensions(products, members, time.time())

    def _rows(self, table: str, columns: tuple[str, ...]) -> list[tuple]:
        """A small dimension table's rows (``columns``), read with Spark or, in a job without it, PyIceberg."""
        if self.spark is not None:
            return [tuple(row) for row in self.spark.table(table).select(*columns).collect()]
        if self._catalog is None:
            self._catalog = pyiceberg_catalog(self.settings)
        scanned = self._catalog.load_table(table).scan(selected_fields=columns).to_arrow()
        return list(zip(*(scanned.column(c).to_pylist() for c in columns), strict=True))

    def _large(self, table: str, key: str, columns: tuple[str, ...]) -> LookupSpec | None:
        """The lookup spec of a source table above ``dimension_lookup_rows``, else None (read it whole).

        Sized from the database's own estimate (information_schema), at every refresh: a table
        loaded with millions of rows switches to lookups at the next one. When the database
        does not answer, the last decision stands (whole, before the first).
        """
        s, pipe = self.settings, self.settings.pipeline
        spec = LookupSpec(s.mariadb.host, s.mariadb.port, s.mariadb.cdc_user,
                          secret(s.mariadb.cdc_password, "mariadb.cdc_password"), s.mariadb.database, table, key,
                          columns, pipe.dimension_cache_rows, self.refresh_seconds)
        try:
            large = pipe.dimension_lookup_rows == 0 or source_rows(spec) > pipe.dimension_lookup_rows
            self._unsized.discard(table)
        except pymysql.err.Error as exc:
            large = self._lookups.get(table, False)
            if table not in self._unsized:  # once, not at every refresh
                log.warning("dimension %s: the source database did not say its size (%s); %s until it does", table,
                            (str(exc).splitlines() or [""])[0][:200],
                            "looking keys up" if large else "reading it whole from the lake")
            self._unsized.add(table)
        if large != self._lookups.get(table):
            log.info("dimension %s: %s", table, "looked up per batch in the source database" if large
                     else "read whole from the lake and broadcast")
        self._lookups[table] = large
        return spec if large else None

    def _swap(self, dims: Dimensions) -> None:
        fresh = self.spark.sparkContext.broadcast(dims) if self.spark is not None else Held(dims)
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
        kind = InheritableThread if self.spark is not None else threading.Thread
        self._refresher = kind(target=self._refresh_loop, name="dimension-refresh", daemon=True)
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
