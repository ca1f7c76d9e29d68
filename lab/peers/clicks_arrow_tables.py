"""The click and dead-letter tables created without Spark, from the same declarations Spark's DDL uses.

``pipeline.tables`` declares each table once as column text (``CLICKS_COLUMNS``) and Spark
creates it from that text. The Spark-free click writer (``lab.peers.clicks_arrow``) must
be able to start on an empty catalog too, so this module reads the same text into a
PyIceberg schema and declares the same partitioning (days of the event time; of the ingest
time for dead letters), write order (productId, event_time) and properties. A table either
writer created is the table the other expects.
"""

from __future__ import annotations

import re

from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table.sorting import SortField, SortOrder
from pyiceberg.transforms import DayTransform, IdentityTransform
from pyiceberg.types import (
    BinaryType,
    DecimalType,
    IcebergType,
    IntegerType,
    LongType,
    NestedField,
    StringType,
    TimestamptzType,
)

from lakehouse.settings import Settings
from pipeline.lake_writer.catalog_tables import ensure_table
from pipeline.tables import CLICKS_COLUMNS, COMMON_PROPERTIES, DEAD_LETTER_COLUMNS

#: Spark SQL types the declarations use -> Iceberg's (Spark's TIMESTAMP is Iceberg's timestamptz)
_TYPES: dict[str, IcebergType] = {"STRING": StringType(), "INT": IntegerType(), "BIGINT": LongType(),
                                  "TIMESTAMP": TimestamptzType(), "BINARY": BinaryType()}
_COLUMN = re.compile(r"^\s*(\w+)\s+(\w+(?:\(\d+,\s*\d+\))?)(?:\s+COMMENT\s+'([^']*)')?\s*,?\s*$")


def schema_of(columns: str) -> Schema:
    """A declaration's column text (``name TYPE [COMMENT '...']`` a line) as an Iceberg schema."""
    fields = []
    for field_id, line in enumerate((line for line in columns.strip().splitlines() if line.strip()), start=1):
        match = _COLUMN.match(line)
        if match is None:
            raise ValueError(f"cannot read the column declaration {line.strip()!r}")
        name, kind, doc = match.groups()
        decimal = re.fullmatch(r"DECIMAL\((\d+),\s*(\d+)\)", kind)
        iceberg = DecimalType(int(decimal[1]), int(decimal[2])) if decimal else _TYPES[kind]
        fields.append(NestedField(field_id, name, iceberg, required=False, doc=doc))
    return Schema(*fields)


def _by_day(schema: Schema, column: str) -> PartitionSpec:
    source = schema.find_field(column).field_id
    return PartitionSpec(PartitionField(source, 1000, DayTransform(), f"{column}_day"))


def ensure_clicks_tables(settings: Settings, catalog) -> None:
    """Create the click and dead-letter tables if missing, as ``pipeline.tables.ensure_clicks_tables`` would."""
    clicks = schema_of(CLICKS_COLUMNS)
    order = SortOrder(SortField(clicks.find_field("productId").field_id, IdentityTransform()),
                      SortField(clicks.find_field("event_time").field_id, IdentityTransform()))
    # what Spark's WRITE LOCALLY ORDERED BY sets beside the order
    ensure_table(catalog, settings.catalog.clicks_table, clicks, {**COMMON_PROPERTIES, "write.distribution-mode": "none"},
                 partition_spec=_by_day(clicks, "event_time"), sort_order=order)
    dead = schema_of(DEAD_LETTER_COLUMNS)
    ensure_table(catalog, settings.catalog.dead_letter_table, dead, COMMON_PROPERTIES,
                 partition_spec=_by_day(dead, "ingest_time"))
