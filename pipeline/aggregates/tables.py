"""The live aggregates' result tables, declared as Iceberg schemas (their writer needs no Spark).

One row per key; every batch rewrites the whole (small) table in one commit, so the tables
take the upsert tables' properties: copy-on-write, merged manifests, snapshots kept 10 minutes.
Field ids and types are those the Spark DDL of earlier releases gave them, so tables made
then are read and written as they are.
"""

from __future__ import annotations

from pyiceberg.schema import Schema
from pyiceberg.types import BinaryType, DecimalType, IntegerType, LongType, NestedField, StringType, TimestamptzType

from lakehouse.catalog import pyiceberg_catalog
from lakehouse.settings import Settings
from pipeline.lake_writer.catalog_tables import ensure_table
from pipeline.tables import COMMON_PROPERTIES, UPSERT_PROPERTIES


def _measures(first_id: int) -> list[NestedField]:
    docs = [("views", LongType(), "click events counted"),
            ("unique_users", LongType(), "distinct uid (HyperLogLog estimate; exact for small counts)"),
            ("users_sketch", BinaryType(), "HLL sketch of uid, merged batch by batch"),
            ("expend_time_total", LongType(), "sum of expendTime"),
            ("last_event_time", TimestamptzType(), None),
            ("updated_at", TimestamptzType(), "when this row last changed: the ingest time of the newest click it counts")]
    return [NestedField(first_id + i, name, kind, required=False, doc=doc) for i, (name, kind, doc) in enumerate(docs)]


def product_views_schema() -> Schema:
    return Schema(
        NestedField(1, "productId", StringType(), required=False),
        NestedField(2, "name", StringType(), required=False, doc="product name the events were enriched with"),
        NestedField(3, "product_price", DecimalType(10, 4), required=False,
                    doc="price the events were enriched with: a price change starts a new row"),
        *_measures(4))


def member_activity_schema() -> Schema:
    return Schema(NestedField(1, "member_level", IntegerType(), required=False,
                              doc="null for users without a member record"), *_measures(2))


def ensure_aggregate_tables(settings: Settings, catalog=None) -> None:
    """Create the result tables if missing; give existing ones the properties declared since."""
    catalog = catalog or pyiceberg_catalog(settings)
    cat = settings.catalog
    for table, schema in ((cat.product_views_table, product_views_schema()),
                          (cat.member_activity_table, member_activity_schema())):
        ensure_table(catalog, table, schema, {**COMMON_PROPERTIES, **UPSERT_PROPERTIES})
