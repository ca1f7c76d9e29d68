"""A dimension table follows its source's schema: new columns and wider types, in the commit of the first change after them.

The capture records each captured table's schema in the schema history topic
(``pipeline.capture.schema_history``) before any change after a DDL; the apply job reads the
newest record when a batch carries a field its table does not have, or when a record is
newer than the table's, and the writer stages the Iceberg schema update in the same
transaction as the batch's rows (``DimensionWriter.apply``): readers see the new column and
the first rows that fill it in one snapshot. Earlier rows read null.

Like the click contract's evolution (``lakehouse.contract.history``), every change is
recorded in the table's properties (``lakehouse.source-schema.history``, a JSON list kept
when snapshots expire) and in the snapshot that made it (``lakehouse.schema-change``).
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass

from pyiceberg.schema import Schema
from pyiceberg.types import DecimalType, DoubleType, FloatType, IcebergType, IntegerType, LongType

from pipeline.capture.schema_history import SchemaRecord
from pipeline.capture.source_schema import iceberg_type

HISTORY_PROPERTY = "lakehouse.source-schema.history"
CHANGE_PROPERTY = "lakehouse.schema-change"


@dataclass(frozen=True)
class ColumnEvolution:
    action: str  # "added" or "widened"
    column: str  # the lake's name
    source: str  # the source's name
    type: IcebergType

    def entry(self) -> dict[str, str]:
        return {"action": self.action, "column": self.column, "source": self.source, "type": str(self.type)}


def _wider(old: IcebergType, new: IcebergType) -> bool:
    return (isinstance(old, IntegerType) and isinstance(new, LongType)) or \
        (isinstance(old, FloatType) and isinstance(new, DoubleType)) or \
        (isinstance(old, DecimalType) and isinstance(new, DecimalType) and new.scale == old.scale
         and new.precision > old.precision)


def plan(table_schema: Schema, record: SchemaRecord, renames: dict[str, str]) -> list[ColumnEvolution]:
    """What the table needs to hold what ``record`` describes: columns to add, columns to widen.

    A column the record has and the table lacks is added; one whose source type now maps to a
    wider Iceberg type is widened. Nothing is ever dropped or narrowed here: the capture stops
    on those (``pipeline.capture.ddl``) until someone decides.
    """
    out = []
    for column in record.schema.columns:
        name = renames.get(column.name, column.name)
        wanted = iceberg_type(column)
        field = table_schema.find_field(name) if name in table_schema.column_names else None
        if field is None:
            out.append(ColumnEvolution("added", name, column.name, wanted))
        elif field.field_type != wanted and _wider(field.field_type, wanted):
            out.append(ColumnEvolution("widened", name, column.name, wanted))
    return out


def stage(tx, evolutions: list[ColumnEvolution], record: SchemaRecord, history: list) -> dict[str, str]:
    """Stage ``evolutions`` in ``tx`` (a PyIceberg transaction) with their history; returns the snapshot
    properties that record them in the commit."""
    if not evolutions:
        return {}
    at = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    with tx.update_schema() as update:
        for change in evolutions:
            if change.action == "added":
                update.add_column(change.column, change.type, doc=f"added at {at}: {record.statement[:200]}")
            else:
                update.update_column(change.column, field_type=change.type)
    entry = {"at": at, "binlog": f"{record.file}:{record.pos}", "statement": record.statement,
             "changes": [c.entry() for c in evolutions]}
    tx.set_properties({HISTORY_PROPERTY: json.dumps([*history, entry], separators=(",", ":"))})
    return {CHANGE_PROPERTY: json.dumps(entry["changes"], separators=(",", ":"))}
