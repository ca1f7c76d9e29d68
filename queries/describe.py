"""`DESCRIBE` and `SHOW CREATE TABLE` answered from a table's Iceberg metadata, in Trino's words.

DuckDB and Spark would each describe a table in their own types (``VARCHAR``, ``string``);
a user who will meet the same table in Trino should see Trino's: ``varchar``, ``bigint``,
``timestamp(6) with time zone``, ``row(...)``, and the ``WITH (partitioning = ...)`` clause
Trino's Iceberg connector prints. Everything comes from the table's metadata (schema,
partition spec, sort order, location): no data file is read.
"""

from __future__ import annotations

import pyarrow as pa
from pyiceberg import types as t

_PRIMITIVES = {
    t.BooleanType: "boolean", t.IntegerType: "integer", t.LongType: "bigint", t.FloatType: "real",
    t.DoubleType: "double", t.DateType: "date", t.TimeType: "time(6)", t.TimestampType: "timestamp(6)",
    t.TimestamptzType: "timestamp(6) with time zone", t.StringType: "varchar", t.UUIDType: "uuid",
    t.BinaryType: "varbinary", t.FixedType: "varbinary",
}


def trino_type(kind: t.IcebergType) -> str:
    """The type Trino's Iceberg connector shows for an Iceberg type."""
    if isinstance(kind, t.DecimalType):
        return f"decimal({kind.precision}, {kind.scale})"
    if isinstance(kind, t.ListType):
        return f"array({trino_type(kind.element_type)})"
    if isinstance(kind, t.MapType):
        return f"map({trino_type(kind.key_type)}, {trino_type(kind.value_type)})"
    if isinstance(kind, t.StructType):
        return "row(" + ", ".join(f'"{f.name}" {trino_type(f.field_type)}' for f in kind.fields) + ")"
    for cls, name in _PRIMITIVES.items():
        if isinstance(kind, cls):
            return name
    raise ValueError(f"no Trino type for Iceberg type {kind}")


def describe(table) -> pa.Table:
    """Trino's ``DESCRIBE``: Column, Type, Extra, Comment."""
    fields = table.schema().fields
    return pa.table({
        "Column": [f.name for f in fields],
        "Type": [trino_type(f.field_type) for f in fields],
        "Extra": ["" for _ in fields],
        "Comment": [f.doc or "" for f in fields],
    })


def _partitioning(table) -> list[str]:
    schema = table.schema()
    out = []
    for field in table.spec().fields:
        column = schema.find_column_name(field.source_id)
        transform = str(field.transform)
        name, _, arg = transform.partition("[")
        if name == "identity":
            out.append(column)
        elif arg:
            out.append(f"{name}({column}, {arg.rstrip(']')})")
        else:
            out.append(f"{name}({column})")
    return out


def _sorted_by(table) -> list[str]:
    schema = table.schema()
    out = []
    for field in table.sort_order().fields:
        direction = "ASC" if "asc" in str(field.direction).lower() else "DESC"
        nulls = "NULLS FIRST" if "first" in str(field.null_order).lower() else "NULLS LAST"
        out.append(f"{schema.find_column_name(field.source_id)} {direction} {nulls}")
    return out


def show_create_table(table, catalog: str) -> pa.Table:
    """Trino's ``SHOW CREATE TABLE`` for an Iceberg table (one row, one column ``Create Table``)."""
    namespace, name = table.name()[-2:]
    columns = []
    for f in table.schema().fields:
        line = f"   {f.name} {trino_type(f.field_type)}" + (" NOT NULL" if f.required else "")
        if f.doc:
            line += " COMMENT '" + f.doc.replace("'", "''") + "'"
        columns.append(line)
    properties = [
        f"   format = '{table.properties.get('write.format.default', 'parquet').upper()}'",
        f"   format_version = {table.format_version}",
        f"   location = '{table.location()}'",
    ]
    for key, values in (("partitioning", _partitioning(table)), ("sorted_by", _sorted_by(table))):
        if values:
            properties.append(f"   {key} = ARRAY[" + ", ".join(f"'{v}'" for v in values) + "]")
    text = (f"CREATE TABLE {catalog}.{namespace}.{name} (\n" + ",\n".join(columns) + "\n)\n"
            + "WITH (\n" + ",\n".join(properties) + "\n)")
    return pa.table({"Create Table": [text]})
