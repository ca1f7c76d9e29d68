"""What the capture does with DDL on a captured table (pipeline/capture/ddl.py), the source's columns given."""

from __future__ import annotations

import pytest

from pipeline.capture.ddl import DdlFollower, SchemaChangeError
from pipeline.capture.source_schema import SourceColumn, SourceSchema

KEY = SourceColumn("userid", "varchar", "varchar(32)", False, 32)
LEVEL = SourceColumn("memberLevel", "int", "int(11)", False, None, 10, 0)
BEFORE = SourceSchema("user_member", (KEY, LEVEL), ("userid",))


def follower(now: SourceSchema, accept: str | None = None):
    published = []
    return DdlFollower("shop", {"user_member": BEFORE}, published.append, lambda table: now, accept,
                       {"user_member": "dim_db.user_member"}), published


def test_a_new_column_is_recorded_before_the_capture_goes_on():
    email = SourceColumn("email", "varchar", "varchar(128)", True, 128)
    follow, published = follower(SourceSchema("user_member", (KEY, LEVEL, email), ("userid",)))
    follow.statement("ALTER TABLE user_member ADD COLUMN email VARCHAR(128)", "binlog.000002", 900, None)
    assert [(r.reason, r.file, r.pos, [c.name for c in r.schema.columns]) for r in published] == [
        ("ddl", "binlog.000002", 900, ["userid", "memberLevel", "email"])]
    assert follow.schemas["user_member"].column("email") == email


def test_other_tables_and_other_databases_are_not_judged():
    follow, published = follower(BEFORE)
    follow.statement("ALTER TABLE orders DROP COLUMN x", "b", 1, None)
    follow.statement("ALTER TABLE other_db.user_member DROP COLUMN memberLevel", "b", 2, None)
    assert published == []


def test_a_dropped_column_stops_the_capture_saying_what_the_lake_holds_and_how_to_resume():
    follow, published = follower(SourceSchema("user_member", (KEY,), ("userid",)))
    with pytest.raises(SchemaChangeError) as stopped:
        follow.statement("ALTER TABLE `shop`.`user_member` DROP COLUMN memberLevel", "binlog.000002", 1200,
                         {"file": "binlog.000002", "pos": 1100})
    message = str(stopped.value)
    assert "memberLevel: dropped" in message and "dim_db.user_member" in message
    assert "up to binlog binlog.000002:1100" in message and "--accept-ddl binlog.000002:1200" in message
    assert published == []


def test_an_accepted_ddl_is_recorded_and_followed_at_that_position_only():
    narrower = SourceSchema("user_member", (KEY, SourceColumn("memberLevel", "smallint", "smallint(6)", False)),
                            ("userid",))
    follow, published = follower(narrower, accept="binlog.000002:1200")
    with pytest.raises(SchemaChangeError):
        follow.statement("ALTER TABLE user_member MODIFY memberLevel SMALLINT", "binlog.000002", 1300, None)
    follow.statement("ALTER TABLE user_member MODIFY memberLevel SMALLINT", "binlog.000002", 1200, None)
    assert published[-1].schema == narrower


def test_truncate_stops_and_cannot_be_accepted():
    follow, _ = follower(BEFORE, accept="b:5")
    with pytest.raises(SchemaChangeError) as stopped:
        follow.statement("TRUNCATE TABLE user_member", "b", 5, None)
    assert "TRUNCATE TABLE" in str(stopped.value) and "--accept-ddl" not in str(stopped.value)
