"""A table of the click table's own layout, for a peer that cannot declare it (Flink SQL has no ``days()``).

The same DDL the pipeline runs (``pipeline.tables.ensure_clicks_tables``), through Spark, so
every system in `lakehouse bench peers` writes the same partitioning, sort order and properties.
"""

from __future__ import annotations

import sys


def main(table: str) -> None:
    # deferred: pyspark and the session builder, only in this short-lived process
    from lakehouse.settings import load_settings
    from pipeline.spark_session import build_session
    from pipeline.tables import ensure_clicks_tables

    settings = load_settings()
    settings.catalog.clicks_table = table
    spark = build_session(settings, "peer-click-table")
    ensure_clicks_tables(spark, settings)
    spark.stop()


if __name__ == "__main__":
    main(sys.argv[1])
