"""A source table's schema as Iceberg types, and which DDL the lake follows (pipeline/capture/source_schema.py)."""

from __future__ import annotations

import pytest
from pyiceberg.types import (
    BinaryType,
    DateType,
    DecimalType,
    DoubleType,
    IntegerType,
    LongType,
    StringType,
    TimestampType,
    TimestamptzType,
)

from pipeline.capture.source_schema import Follow, SourceColumn, SourceSchema, classify, iceberg_type, to_iceberg_schema


def col(name: str, column_type: str, nullable: bool = True) -> SourceColumn:
    """A column as information_schema would describe ``column_type``."""
    kind = column_type.split("(")[0].split()[0].lower()
    inside = column_type[column_type.find("(") + 1:column_type.find(")")] if "(" in column_type else ""
    numbers = [int(x) for x in inside.split(",") if x.strip().isdigit()]
    length = numbers[0] if kind in ("char", "varchar", "binary", "varbinary") and numbers else None
    precision = numbers[0] if kind in ("decimal", "numeric") and numbers else None
    scale = numbers[1] if kind in ("decimal", "numeric") and len(numbers) > 1 else (0 if precision else None)
    return SourceColumn(name, kind, column_type, nullable, length, precision, scale)


MEMBERS = SourceSchema("user_member", (col("userid", "varchar(32)", False), col("name", "varchar(255)", False),
                                       col("show_params", "varchar(1024)"), col("memberLevel", "int(11)", False),
                                       col("update_time", "timestamp(3)", False)), ("userid",))


@pytest.mark.parametrize("column_type, expected", [
    ("tinyint(4)", IntegerType()), ("int(10) unsigned", LongType()), ("int(11)", IntegerType()),
    ("bigint(20)", LongType()), ("bigint(20) unsigned", DecimalType(20, 0)), ("decimal(10,4)", DecimalType(10, 4)),
    ("decimal(65,2)", StringType()), ("double", DoubleType()), ("varchar(32)", StringType()), ("json", StringType()),
    ("date", DateType()), ("datetime(3)", TimestampType()), ("timestamp(3)", TimestamptzType()),
    ("varbinary(16)", BinaryType()), ("enum('a','b')", StringType()), ("geometry", StringType()),
])
def test_each_source_type_has_an_iceberg_type(column_type, expected):
    assert iceberg_type(col("c", column_type)) == expected


def test_the_seed_member_table_becomes_the_lake_schema_it_always_had():
    schema = to_iceberg_schema(MEMBERS, {"memberLevel": "member_level"})
    assert [(f.name, str(f.field_type), f.required) for f in schema.fields] == [
        ("userid", "string", True), ("name", "string", False), ("show_params", "string", False),
        ("member_level", "int", False), ("update_time", "timestamptz", False)]
    assert schema.identifier_field_names() == {"userid"}


def test_a_new_column_is_added_and_a_wider_type_widened_where_iceberg_can():
    after = SourceSchema("user_member", (*MEMBERS.columns[:3], col("memberLevel", "bigint(20)", False),
                                         MEMBERS.columns[4], col("email", "varchar(128)")), ("userid",))
    changes = {c.column: c.follow for c in classify(MEMBERS, after)}
    assert changes == {"email": Follow.ADD, "memberLevel": Follow.WIDEN}


def test_a_longer_varchar_or_a_wider_small_int_changes_nothing_in_the_lake():
    after = SourceSchema("user_member", (MEMBERS.columns[0], col("name", "varchar(512)", False), *MEMBERS.columns[2:]),
                         ("userid",))
    assert [c.follow for c in classify(MEMBERS, after)] == [Follow.CARRY]
    small = SourceSchema("t", (col("k", "int(11)", False), col("n", "tinyint(4)")), ("k",))
    wider = SourceSchema("t", (col("k", "int(11)", False), col("n", "smallint(6)")), ("k",))
    assert [c.follow for c in classify(small, wider)] == [Follow.CARRY]


@pytest.mark.parametrize("after, why", [
    (SourceSchema("user_member", MEMBERS.columns[:2] + MEMBERS.columns[3:], ("userid",)), "dropped"),
    (SourceSchema("user_member", (*MEMBERS.columns[:2], col("params", "varchar(1024)"), *MEMBERS.columns[3:]),
                  ("userid",)), "renamed to params"),
    (SourceSchema("user_member", (*MEMBERS.columns[:3], col("memberLevel", "smallint(6)", False), MEMBERS.columns[4]),
                  ("userid",)), "narrows"),
    (SourceSchema("user_member", (MEMBERS.columns[0], col("name", "varchar(64)", False), *MEMBERS.columns[2:]),
                  ("userid",)), "narrows"),
    (SourceSchema("user_member", MEMBERS.columns, ("userid", "name")), "primary key"),
])
def test_what_the_lake_cannot_follow_stops_with_the_reason(after, why):
    stops = [c for c in classify(MEMBERS, after) if c.follow == Follow.STOP]
    assert stops and why in str(stops[0])


def test_a_decimal_widens_at_the_same_scale_only():
    price = SourceSchema("p", (col("k", "int(11)", False), col("price", "decimal(10,4)")), ("k",))
    more_digits = SourceSchema("p", (col("k", "int(11)", False), col("price", "decimal(12,4)")), ("k",))
    other_scale = SourceSchema("p", (col("k", "int(11)", False), col("price", "decimal(12,6)")), ("k",))
    assert [c.follow for c in classify(price, more_digits)] == [Follow.WIDEN]
    assert [c.follow for c in classify(price, other_scale)] == [Follow.STOP]


def test_a_schema_travels_as_json_unchanged():
    assert SourceSchema.from_json(MEMBERS.to_json()) == MEMBERS
