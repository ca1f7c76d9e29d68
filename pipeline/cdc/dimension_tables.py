"""The product and member dimension tables: declared, created and read through PyIceberg.

Their one writer, the CDC apply job, writes their files and commits through PyIceberg inside its
Spark tasks and driver (``pipeline.cdc.apply``), so they are declared here as Iceberg schemas
rather than Spark DDL; Spark, DuckDB and Trino
read them like every other table. The key column is the table's identifier field.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyiceberg.schema import Schema
from pyiceberg.types import (
    DecimalType,
    IntegerType,
    NestedField,
    StringType,
    TimestamptzType,
)

from lakehouse.catalog import pyiceberg_catalog
from lakehouse.settings import Settings
from pipeline.kafka_source import offsets as kafka_offsets
from pipeline.lake_writer.catalog_tables import ensure_table, newest_summary_with
from pipeline.tables import COMMON_PROPERTIES, UPSERT_PROPERTIES


@dataclass(frozen=True)
class Dimension:
    table: str
    key: str
    schema: Schema


def dimensions(settings: Settings) -> dict[str, Dimension]:
    """The dimension tables by source table name."""
    def columns(key: str, *rest: NestedField) -> Schema:
        return Schema(NestedField(1, key, StringType(), required=True), NestedField(2, "name", StringType()),
                      *rest, NestedField(5, "update_time", TimestamptzType()), identifier_field_ids=[1])

    products, members = settings.table("products"), settings.table("members")
    assert products.key and members.key and products.source and members.source  # declared in the registry
    return {
        products.source: Dimension(products.table, products.key, columns(
            products.key, NestedField(3, "description", StringType()),
            NestedField(4, "product_price", DecimalType(10, 4)))),
        members.source: Dimension(members.table, members.key, columns(
            members.key, NestedField(3, "show_params", StringType()), NestedField(4, "member_level", IntegerType()))),
    }


def ensure_dimension_tables(settings: Settings, catalog=None) -> None:
    """Create the dimension tables if missing; give existing ones the properties declared since."""
    catalog = catalog or pyiceberg_catalog(settings)
    for dimension in dimensions(settings).values():
        ensure_table(catalog, dimension.table, dimension.schema, {**COMMON_PROPERTIES, **UPSERT_PROPERTIES})


def committed_position(table) -> kafka_offsets.Position:
    """The Kafka position the newest snapshot of the current lineage that recorded one holds (a PyIceberg table)."""
    return kafka_offsets.position_of(newest_summary_with(table, kafka_offsets.OFFSETS_PROPERTY))
