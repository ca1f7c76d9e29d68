"""Product and member dimensions for enrichment, as of processing time.

The dimension tables are small and change through CDC. Each job keeps a snapshot of
them and reloads it at most every ``dimension_refresh_seconds``, so an event is
enriched with the dimension values the lakehouse held when it was processed.

The snapshot is read to the driver first and only then cached as a DataFrame of its
own. Caching the table scan itself (``spark.table(...).cache()``) is a trap: Spark
registers the plan before it is materialised, keeps a plan whose read failed (the
object store down for a moment) and hands that failure to every later query of the
same table, so one failed read failed every batch after it. A broadcast join ships
the dimension through the driver anyway, so holding it there costs nothing extra.
"""

from __future__ import annotations

import time

from lakehouse.settings import Settings


class DimensionCache:
    def __init__(self, spark, settings: Settings):
        self.spark = spark
        self.settings = settings
        self.refresh_seconds = settings.pipeline.dimension_refresh_seconds
        self._loaded_at = float("-inf")
        self._products = self._members = None

    def _snapshot(self, table):
        """``table`` read now, as a cached DataFrame that no longer depends on the table's files."""
        rows, schema = table.collect(), table.schema  # a failed read raises here, before any cache exists
        frame = self.spark.createDataFrame(rows, schema).cache()
        try:
            frame.count()
        except Exception:
            frame.unpersist()
            raise
        return frame

    def _load(self) -> None:
        from pyspark.sql import functions as F

        cat = self.settings.catalog
        products = self._snapshot(self.spark.table(cat.products_table)
                                  .select("productId", F.col("name"), F.col("product_price"))
                                  .dropDuplicates(["productId"]))
        try:
            members = self._snapshot(self.spark.table(cat.members_table)
                                     .select(F.col("userid").alias("uid"), "member_level")
                                     .dropDuplicates(["uid"]))
        except Exception:
            products.unpersist()
            raise
        self.invalidate()
        self._products, self._members = products, members
        self._loaded_at = time.monotonic()

    def invalidate(self) -> None:
        """Drop the snapshot: the next batch reads the dimensions afresh (after a failed batch)."""
        for old in (self._products, self._members):
            if old is not None:
                old.unpersist()
        self._products = self._members = None
        self._loaded_at = float("-inf")

    def frames(self):
        """(products, members) DataFrames, reloaded when older than the refresh interval."""
        if time.monotonic() - self._loaded_at >= self.refresh_seconds:
            self._load()
        return self._products, self._members

    def enrich(self, events):
        """Left-join events with both dimensions (unknown keys keep nulls, as in the seed)."""
        from pyspark.sql import functions as F

        products, members = self.frames()
        return (events.join(F.broadcast(products), "productId", "left")
                      .join(F.broadcast(members), "uid", "left"))
