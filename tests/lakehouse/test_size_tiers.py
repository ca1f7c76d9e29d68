"""The lake's one tiering rule (``lakehouse.size_tiers``), as maintenance (bytes) and the writer's folds (rows)
use it: a merge of a full tier always writes a file above that tier, so nothing is merged twice at one tier."""

from __future__ import annotations

import pytest

from lakehouse.job_settings import MaintenanceSettings
from lakehouse.size_tiers import full_tiers, tier_bounds, tier_of


def test_bounds_grow_by_the_ratio_up_to_the_final_size():
    assert tier_bounds(1, 100_000, 4.0) == (1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 100_000)
    assert tier_bounds(2, 3, 4.0) == (2, 3)
    with pytest.raises(ValueError, match="above 1"):
        tier_bounds(1, 10, 1.0)


def test_maintenance_tiers_are_the_rule_in_bytes():
    m = MaintenanceSettings()
    bounds = m.tier_bounds
    assert bounds == tier_bounds(m.small_file_bytes, m.final_file_bytes, m.compact_medium_files / 2)
    assert bounds[0] == m.small_file_bytes and bounds[-1] == m.final_file_bytes


@pytest.mark.parametrize("ratio, fan_in", [(4.0, 8), (4.0, 4), (1.5, 3)])
def test_a_full_tier_merged_lands_above_it(ratio, fan_in):
    """``fan_in`` >= ``ratio`` files of a tier's smallest size sum to at least its upper bound."""
    bounds = tier_bounds(1, 10**9, ratio)
    for tier, upper in enumerate(bounds):
        lower = bounds[tier - 1] if tier else 1
        assert fan_in * lower >= upper  # a tier's merge output is at least its upper bound: above the tier


def test_full_tiers_take_only_tiers_that_gathered_the_fan_in():
    bounds = tier_bounds(1, 10_000, 4.0)
    files = [("batch", n) for n in (10, 11, 12, 13)] + [("merged", 300), ("merged", 280), ("final", 20_000)]
    assert full_tiers(files, lambda f: f[1], bounds, 3) == [[("batch", 10), ("batch", 11), ("batch", 12),
                                                             ("batch", 13)]]
    assert full_tiers(files + [("merged", 500)], lambda f: f[1], bounds, 3)[1] == [("merged", 300), ("merged", 280),
                                                                                  ("merged", 500)]
    assert tier_of(20_000, bounds) is None
