"""What a dimension table must change to hold its source's newest schema (pipeline/cdc/table_evolution.py)."""

from __future__ import annotations

from pyiceberg.types import IntegerType, LongType, StringType

from pipeline.capture.schema_history import SchemaRecord
from pipeline.capture.source_schema import SourceColumn, SourceSchema, to_iceberg_schema
from pipeline.cdc.table_evolution import plan

KEY = SourceColumn("userid", "varchar", "varchar(32)", False, 32)
LEVEL = SourceColumn("memberLevel", "int", "int(11)", False, None, 10, 0)
RENAMES = {"memberLevel": "member_level"}
TABLE = to_iceberg_schema(SourceSchema("user_member", (KEY, LEVEL), ("userid",)), RENAMES)


def record(*columns: SourceColumn) -> SchemaRecord:
    return SchemaRecord(SourceSchema("user_member", columns, ("userid",)), "binlog.000002", 100, "ddl", "ALTER ...")


def test_nothing_to_do_when_the_table_already_holds_the_source():
    assert plan(TABLE, record(KEY, LEVEL), RENAMES) == []


def test_a_new_source_column_is_added_under_its_own_name_and_a_renamed_one_under_the_lakes():
    email = SourceColumn("email", "varchar", "varchar(128)", True, 128)
    changes = plan(TABLE, record(KEY, SourceColumn("memberLevel", "bigint", "bigint(20)", False), email), RENAMES)
    assert [(c.action, c.column, c.source, c.type) for c in changes] == [
        ("widened", "member_level", "memberLevel", LongType()), ("added", "email", "email", StringType())]


def test_a_type_the_lake_cannot_widen_to_is_left_alone_here():
    """The capture stops on it (pipeline/capture/ddl.py); the apply never narrows or converts a column."""
    changes = plan(TABLE, record(KEY, SourceColumn("memberLevel", "varchar", "varchar(8)", False, 8)), RENAMES)
    assert changes == [] and TABLE.find_field("member_level").field_type == IntegerType()
