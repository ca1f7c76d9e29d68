"""The table registry (``Settings.tables``): every table once, a captured table added by the settings alone, and a
clash of roles, tables or sources refused with what to change."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from lakehouse.cdc_settings import CapturedTable
from lakehouse.settings import Settings


def _with(*extra: CapturedTable) -> Settings:
    s = Settings()
    return Settings.model_validate({**s.model_dump(), "cdc": {"extra_tables": [e.model_dump() for e in extra]}})


def test_the_seed_tables_and_an_added_one_each_once_with_writer_and_upkeep():
    s = _with(CapturedTable(source="orders", table="dim_db.orders"))
    roles = {t.role: t for t in s.tables}
    assert list(roles) == ["clicks", "dead_letter", "products", "members", "product_views", "member_activity",
                           "daily_users", "orders"]
    assert (roles["orders"].writer, roles["orders"].upkeep, roles["orders"].key) == ("dims", "writer-folds", None)
    assert roles["members"].renames == {"memberLevel": "member_level"} and roles["clicks"].upkeep == "compaction"
    assert [c.source for c in s.captured_tables] == ["products", "user_member", "orders"]
    assert s.table("orders").table == "dim_db.orders"


def test_a_source_named_like_a_role_gets_a_role_of_its_own():
    with pytest.raises(ValidationError, match="share the role .*members.*each may name its own role"):
        _with(CapturedTable(source="members", table="dim_db.shop_members"))
    s = _with(CapturedTable(source="members", table="dim_db.shop_members", role="shop_members"))
    assert s.table("shop_members").source == "members"
    assert [c.role for c in s.captured_tables][-1] == "shop_members"


def test_a_source_or_table_captured_twice_is_refused():
    with pytest.raises(ValidationError, match="share the source table user_member"):
        _with(CapturedTable(source="user_member", table="dim_db.members_again", role="again"))
    with pytest.raises(ValidationError, match="share the Iceberg table dim_db.products"):
        _with(CapturedTable(source="goods", table="dim_db.products"))
