"""The live-aggregate tests' settings: click and result tables of the test's own."""

from __future__ import annotations

import pytest


@pytest.fixture
def agg_settings(click_settings):
    s = click_settings.model_copy(deep=True)
    suffix = s.catalog.clicks_table.rsplit("_", 1)[1]
    s.catalog.product_views_table = f"ads_test.product_views_{suffix}"
    s.catalog.member_activity_table = f"ads_test.member_activity_{suffix}"
    s.catalog.daily_users_table = f"ads_test.daily_users_{suffix}"
    s.pipeline.aggregate_trigger_seconds = 0.5
    return s
