"""The maintenance rules themselves: which actions a table's health asks for, and the size tiers.

Pure functions of the settings and a table's numbers (the actions run on real tables in
test_maintenance.py); these pin the choices the soak measured.
"""

from __future__ import annotations

from lakehouse.job_settings import MaintenanceSettings
from pipeline.maintenance.actions import merge_tier, planned
from pipeline.maintenance.health import TableHealth

NOW_MS = 10_000_000
MB = 2**20


def health(small: int = 0, *tiers: int) -> TableHealth:
    return TableHealth(table="t", data_files=small + sum(tiers), tier_files_worst_partition=(small, *tiers),
                       delete_files=0, manifests=1, snapshots=1, oldest_snapshot_ms=NOW_MS)


def test_a_merge_writes_files_no_merge_at_its_own_tier_reads_again():
    """The fewest inputs a merge takes, even if sorting halved their size, land in a higher tier.

    Fails with the old bound (3/4 of the target): 8 compaction outputs of ~4 MB (a minute of
    2,000 events/s each) were below it, and so was what merging them wrote.
    """
    for small_mb, fan_in, target_mb in ((2.0, 8, 64), (8.0, 8, 64), (1.0, 3, 64), (2.0, 16, 512), (2.0, 8, 512)):
        s = MaintenanceSettings(small_file_mb=small_mb, compact_medium_files=fan_in, target_file_mb=target_mb)
        bounds = s.tier_bounds
        assert list(bounds) == sorted(set(bounds)) and bounds[-1] == s.final_file_bytes
        for tier in range(1, len(bounds)):
            smallest_merge_output = fan_in * bounds[tier - 1] // 2
            assert bounds[tier] <= smallest_merge_output
    defaults = MaintenanceSettings()
    minute_of_compaction = 4.3 * MB  # measured: one pass's output at 2,000 events/s
    assert defaults.tier_bounds[0] < minute_of_compaction < defaults.tier_bounds[1]


def test_the_tiers_end_at_three_quarters_of_the_target():
    s = MaintenanceSettings(small_file_mb=8.0, compact_medium_files=32, target_file_mb=16)
    assert s.tier_bounds == (8 * MB, 12 * MB)
    assert MaintenanceSettings().tier_bounds == (2 * MB, 8 * MB, 32 * MB, 128 * MB, 384 * MB)


def test_the_highest_full_tier_is_merged_and_takes_the_lower_ones_along():
    s = MaintenanceSettings()
    fan_in = s.compact_medium_files
    assert merge_tier(health(s.compact_small_files, fan_in - 1, fan_in - 1), s) is None
    assert merge_tier(health(0, fan_in, 0, fan_in), s) == 3
    assert planned(health(s.compact_small_files), s, NOW_MS, orphans_due=False) == ["compact"]
    assert planned(health(s.compact_small_files, 0, fan_in), s, NOW_MS, orphans_due=False) == ["merge"]


def test_the_orphan_scan_waits_for_a_pass_without_a_merge():
    s = MaintenanceSettings()
    busy = planned(health(0, s.compact_medium_files), s, NOW_MS, orphans_due=True)
    assert "merge" in busy and "remove_orphans" not in busy
    quiet = planned(health(s.compact_small_files), s, NOW_MS, orphans_due=True)
    assert quiet == ["compact", "remove_orphans"]
    assert planned(health(), s, NOW_MS, orphans_due=False) == []


def simulated_day(s: MaintenanceSettings, writer_files_per_pass: int, writer_file_bytes: float,
                  kept: float = 0.95) -> tuple[int, float]:
    """Run the rule (``planned``, ``merge_tier``) over a day-partition for 24 hours of passes.

    Sizes as the 90-minute soak measured them at 2,000 events/s: 30 writer files of ~0.15 MB
    a pass, and rewrites keeping ~95 % of their input (28 files of 4.35 MB compacted to 4.1 MB;
    merges of 42 MB wrote 39.5 MB). Outputs are split at the target size the way Iceberg's
    rewrite does (a remainder under 3/4 of the target is spread over the other files while
    they stay under 1.1 times the target). Returns the most files the partition held just
    before a pass, and how many bytes were rewritten per byte written.
    """
    target = s.target_file_mb * MB
    files: list[float] = []
    most, written, rewritten = 0, 0.0, 0.0
    for _ in range(24 * 3600 // int(s.interval_seconds)):
        files += [writer_file_bytes] * writer_files_per_pass
        written += writer_file_bytes * writer_files_per_pass
        most = max(most, len(files))
        tiers = [sum(lo <= f < hi for f in files) for lo, hi in zip((0, *s.tier_bounds), s.tier_bounds)]
        now = TableHealth("t", len(files), tuple(tiers), 0, 1, 1, NOW_MS)
        actions, tier = planned(now, s, NOW_MS, False), merge_tier(now, s)
        bound = s.tier_bounds[tier] if "merge" in actions else s.tier_bounds[0] if "compact" in actions else 0
        taken = [f for f in files if f < bound]
        if len(taken) < 2:
            continue
        files = [f for f in files if f >= bound]
        total = sum(taken) * kept
        rewritten += sum(taken)
        whole, remainder = divmod(total, target)
        count = 1 if total < target else int(whole) + (
            1 if remainder > s.final_file_bytes or total / whole >= 1.1 * target else 0)
        files += [total / count] * count
    return most, round(rewritten / written, 1)


def test_a_day_partition_at_2000_events_per_second_stays_under_64_files():
    """The soak's goal over a whole day, where a soak sees at most a few hours of it.

    Fails with the two tiers before (merge outputs stayed put: 197 files by midnight) and
    with a 64 MB target (a day's ~6 GB needs ~100 files that size).
    """
    most, amplification = simulated_day(MaintenanceSettings(), 30, 0.155 * MB)
    assert most <= 64 and amplification < 4  # measured: 56 files, 3.4 bytes rewritten per byte written
    assert simulated_day(TwoTiers(target_file_mb=64), 30, 0.155 * MB)[0] > 64
    assert simulated_day(MaintenanceSettings(target_file_mb=64), 30, 0.155 * MB)[0] > 64


class TwoTiers(MaintenanceSettings):
    """The rule before: small and medium only, merge outputs final."""

    @property
    def tier_bounds(self) -> tuple[int, ...]:
        return super().tier_bounds[:2]


def test_one_expiry_rule_the_retention_the_table_declares_shorter_and_what_must_stay():
    s = MaintenanceSettings(snapshot_retention_minutes=10)
    assert s.expire_before(NOW_MS, None) == NOW_MS - 600_000
    assert s.expire_before(NOW_MS, 120_000) == NOW_MS - 120_000, "a table's own shorter age wins"
    assert s.expire_before(NOW_MS, 3_600_000) == NOW_MS - 600_000, "a longer one does not"
    progress, reader = NOW_MS - 900_000, NOW_MS - 700_000
    assert s.expire_before(NOW_MS, None, [progress, reader]) == progress, "kept from the oldest that must stay"
    assert s.expire_before(NOW_MS, None, [NOW_MS - 1_000]) == NOW_MS - 600_000, "a recent one changes nothing"
