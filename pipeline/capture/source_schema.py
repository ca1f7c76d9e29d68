"""A captured table's schema as the source declares it, its Iceberg schema, and which DDL the lake can follow.

The capture reads a table's columns and primary key from ``information_schema`` at the
snapshot and after each DDL on it, and publishes them (``SourceSchema.to_json``) beside the
changes; the apply job creates the Iceberg table from the first and follows the later ones.
docs/cdc.md has the type table this module implements (``iceberg_type``).

Which changes are followed (``classify``):
- a new column: a nullable Iceberg column of the same name (earlier rows read null);
- a wider type where Iceberg can widen too (``INT`` -> ``BIGINT``, ``FLOAT`` -> ``DOUBLE``, a
  ``DECIMAL`` of more digits at the same scale): the Iceberg column is widened;
- a change whose Iceberg type stays the same (a longer ``VARCHAR``, ``TINYINT`` -> ``INT``):
  nothing to do, the values are carried as they are;
- anything else (a column dropped or renamed, a narrower type, a changed ``DECIMAL`` scale, a
  new primary key) the lake cannot follow without a decision: the capture stops and says so.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from enum import Enum

from pyiceberg.schema import Schema
from pyiceberg.types import (
    BinaryType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IcebergType,
    IntegerType,
    LongType,
    NestedField,
    StringType,
    TimestampType,
    TimestamptzType,
)

#: integer types by the bits they hold (signed); UNSIGNED needs one bit more
INTEGER_BITS = {"tinyint": 8, "smallint": 16, "mediumint": 24, "int": 32, "integer": 32, "bigint": 64, "year": 16}
TEXT = {"char", "varchar", "tinytext", "text", "mediumtext", "longtext", "enum", "set", "json", "time"}
BYTES = {"binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob", "bit"}
MAX_DECIMAL_DIGITS = 38  # Iceberg's; a wider DECIMAL is carried as text


@dataclass(frozen=True)
class SourceColumn:
    """One column as ``information_schema.columns`` describes it."""

    name: str
    data_type: str  # DATA_TYPE, lower case: int, varchar, decimal, ...
    column_type: str  # COLUMN_TYPE: int(11) unsigned, varchar(32), decimal(10,4), ...
    nullable: bool = True
    length: int | None = None  # CHARACTER_MAXIMUM_LENGTH
    precision: int | None = None  # NUMERIC_PRECISION
    scale: int | None = None  # NUMERIC_SCALE

    @property
    def unsigned(self) -> bool:
        return "unsigned" in self.column_type.lower()

    def bits(self) -> int | None:
        base = INTEGER_BITS.get(self.data_type)
        return None if base is None else base + int(self.unsigned)


@dataclass(frozen=True)
class SourceSchema:
    table: str
    columns: tuple[SourceColumn, ...]
    key: tuple[str, ...]

    def column(self, name: str) -> SourceColumn | None:
        return next((c for c in self.columns if c.name == name), None)

    def to_json(self) -> str:
        return json.dumps({"table": self.table, "key": list(self.key), "columns": [asdict(c) for c in self.columns]})

    @classmethod
    def from_json(cls, text: str | bytes) -> SourceSchema:
        data = json.loads(text)
        return cls(data["table"], tuple(SourceColumn(**c) for c in data["columns"]), tuple(data["key"]))


def read_source_schema(cur, database: str, table: str) -> SourceSchema:
    """The table's columns (in order) and primary key, from ``information_schema`` (a pymysql cursor)."""
    cur.execute("SELECT column_name, data_type, column_type, is_nullable, character_maximum_length, "
                "numeric_precision, numeric_scale FROM information_schema.columns "
                "WHERE table_schema = %s AND table_name = %s ORDER BY ordinal_position", (database, table))
    columns = tuple(SourceColumn(name, str(kind).lower(), str(full), nullable == "YES",
                                 None if length is None else int(length), None if precision is None else int(precision),
                                 None if scale is None else int(scale))
                    for name, kind, full, nullable, length, precision, scale in cur.fetchall())
    cur.execute("SELECT column_name FROM information_schema.key_column_usage WHERE table_schema = %s "
                "AND table_name = %s AND constraint_name = 'PRIMARY' ORDER BY ordinal_position", (database, table))
    return SourceSchema(table, columns, tuple(r[0] for r in cur.fetchall()))


def iceberg_type(column: SourceColumn) -> IcebergType:
    """The Iceberg type a source column is stored as (docs/cdc.md, "Types")."""
    kind = column.data_type
    bits = column.bits()
    if bits is not None:
        if bits <= 32:
            return IntegerType()
        return LongType() if bits <= 64 else DecimalType(20, 0)  # BIGINT UNSIGNED: up to 2^64 - 1
    if kind in ("boolean", "bool"):
        return IntegerType()  # MySQL's BOOLEAN is TINYINT(1): 0 and 1, kept as numbers
    if kind == "float":
        return FloatType()
    if kind in ("double", "real"):
        return DoubleType()
    if kind in ("decimal", "numeric"):
        precision, scale = column.precision or 10, column.scale or 0
        return DecimalType(precision, scale) if precision <= MAX_DECIMAL_DIGITS else StringType()
    if kind == "date":
        return DateType()
    if kind == "datetime":
        return TimestampType()  # a wall-clock time, no zone: as the source holds it
    if kind == "timestamp":
        return TimestamptzType()  # an instant: the capture sends it in UTC
    if kind in BYTES:
        return BinaryType()
    return StringType()  # TEXT, and any type not named above, carried as its text


def to_iceberg_schema(source: SourceSchema, renames: dict[str, str] | None = None) -> Schema:
    """The Iceberg schema of a captured table: its columns in order (renamed where ``renames`` says), the
    primary key required and the table's identifier, every other column optional (later rows may omit it)."""
    renames = renames or {}
    fields = [NestedField(i, renames.get(c.name, c.name), iceberg_type(c), required=c.name in source.key)
              for i, c in enumerate(source.columns, start=1)]
    key_ids = [f.field_id for f, c in zip(fields, source.columns, strict=True) if c.name in source.key]
    return Schema(*fields, identifier_field_ids=key_ids)


class Follow(Enum):
    ADD = "add"  # a new nullable column
    WIDEN = "widen"  # the Iceberg column widened
    CARRY = "carry"  # the same Iceberg type: nothing to change
    STOP = "stop"  # the lake cannot follow without a decision


@dataclass(frozen=True)
class ColumnChange:
    follow: Follow
    column: str
    detail: str

    def __str__(self) -> str:
        return f"{self.column}: {self.detail}"


def _widening(before: SourceColumn, after: SourceColumn) -> ColumnChange:
    old, new = iceberg_type(before), iceberg_type(after)
    name, what = after.name, f"{before.column_type} -> {after.column_type}"
    narrower = _narrower(before, after)
    if narrower:
        return ColumnChange(Follow.STOP, name, f"{what} narrows the column ({narrower})")
    if old == new:
        return ColumnChange(Follow.CARRY, name, f"{what}: still {new} in the lake")
    if (isinstance(old, IntegerType) and isinstance(new, LongType)) or \
            (isinstance(old, FloatType) and isinstance(new, DoubleType)) or \
            (isinstance(old, DecimalType) and isinstance(new, DecimalType) and old.scale == new.scale
             and new.precision > old.precision):
        return ColumnChange(Follow.WIDEN, name, f"{what}: {old} -> {new} in the lake")
    return ColumnChange(Follow.STOP, name, f"{what}: the lake's {old} cannot become {new}")


def _narrower(before: SourceColumn, after: SourceColumn) -> str | None:
    """Why ``after`` holds less than ``before`` (None when it does not)."""
    bits_before, bits_after = before.bits(), after.bits()
    if bits_before is not None and bits_after is not None and bits_after < bits_before:
        return f"{bits_before} -> {bits_after} bits"
    if before.length is not None and after.length is not None and after.length < before.length:
        return f"{before.length} -> {after.length} characters"
    if before.data_type == after.data_type and before.precision is not None and after.precision is not None:
        if after.precision < before.precision:
            return f"{before.precision} -> {after.precision} digits"
        if before.data_type in ("decimal", "numeric") and after.scale != before.scale:
            return f"scale {before.scale} -> {after.scale}"
    return None


def classify(before: SourceSchema, after: SourceSchema) -> list[ColumnChange]:
    """What each difference between two schemas of one table means for the lake (the module says)."""
    changes: list[ColumnChange] = []
    if before.key != after.key:
        changes.append(ColumnChange(Follow.STOP, ",".join(after.key) or "(none)",
                                    f"the primary key changed from ({', '.join(before.key)})"))
    gone = [c for c in before.columns if after.column(c.name) is None]
    new = [c for c in after.columns if before.column(c.name) is None]
    for column in gone:
        renamed = next((c for c in new if c.column_type == column.column_type), None)
        detail = f"renamed to {renamed.name}?" if renamed else "dropped"
        changes.append(ColumnChange(Follow.STOP, column.name, f"{detail} (the lake keeps the column and its values)"))
    for column in new:
        changes.append(ColumnChange(Follow.ADD, column.name, f"new {column.column_type}: a nullable "
                                                              f"{iceberg_type(column)} column, earlier rows null"))
    for column in after.columns:
        previous = before.column(column.name)
        if previous is not None and (previous.column_type, previous.data_type) != (column.column_type, column.data_type):
            changes.append(_widening(previous, column))
    return changes
