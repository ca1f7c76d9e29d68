"""Product and member dimensions for enrichment, as of processing time.

The dimension tables are small and change through CDC. Each job keeps a cached,
broadcastable copy and reloads it at most every ``dimension_refresh_seconds``, so an
event is enriched with the dimension values the lakehouse held when it was processed.
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

    def _load(self) -> None:
        from pyspark.sql import functions as F

        cat = self.settings.catalog
        products = (self.spark.table(cat.products_table)
                    .select("productId", F.col("name"), F.col("product_price"))
                    .dropDuplicates(["productId"]).cache())
        members = (self.spark.table(cat.members_table)
                   .select(F.col("userid").alias("uid"), "member_level")
                   .dropDuplicates(["uid"]).cache())
        products.count(), members.count()  # materialise now, not inside the next batch
        for old in (self._products, self._members):
            if old is not None:
                old.unpersist()
        self._products, self._members = products, members
        self._loaded_at = time.monotonic()

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
