"""The maintenance rules themselves: which actions a table's health asks for, and the size tiers.

Pure functions of the settings and a table's numbers (the actions run on real tables in
test_maintenance.py); these pin the choices the soak measured.
"""

from __future__ import annotations

from lakehouse.job_settings import MaintenanceSettings
from pipeline.maintenance.actions import planned
from pipeline.maintenance.health import TableHealth

NOW_MS = 10_000_000


def health(small: int = 0, medium: int = 0) -> TableHealth:
    return TableHealth(table="t", data_files=small + medium, small_files_worst_partition=small,
                       medium_files_worst_partition=medium, delete_files=0, manifests=1, snapshots=1,
                       oldest_snapshot_ms=NOW_MS)


def test_a_merge_writes_files_no_later_merge_reads_again():
    """The fewest inputs a merge takes, even if sorting halved their size, land above medium.

    Fails with the old bound (3/4 of the target): 8 compaction outputs of ~4 MB (a minute of
    2,000 events/s each) are below it, and so was what merging them wrote.
    """
    for small_mb, fan_in, target_mb in ((2.0, 8, 64), (8.0, 8, 64), (1.0, 3, 64), (2.0, 16, 512)):
        s = MaintenanceSettings(small_file_mb=small_mb, compact_medium_files=fan_in, target_file_mb=target_mb)
        smallest_merge_output = fan_in * s.small_file_bytes // 2
        assert s.small_file_bytes < s.medium_file_bytes <= smallest_merge_output
    defaults = MaintenanceSettings()
    minute_of_compaction = 4.3 * 2**20  # measured: one pass's output at 2,000 events/s
    assert defaults.small_file_bytes < minute_of_compaction < defaults.medium_file_bytes
    assert defaults.compact_medium_files * minute_of_compaction * 0.8 > defaults.medium_file_bytes


def test_the_medium_bound_never_passes_three_quarters_of_the_target():
    s = MaintenanceSettings(small_file_mb=8.0, compact_medium_files=32, target_file_mb=16)
    assert s.medium_file_bytes == 12 * 2**20


def test_the_orphan_scan_waits_for_a_pass_without_a_merge():
    s = MaintenanceSettings()
    busy = planned(health(medium=s.compact_medium_files), s, NOW_MS, orphans_due=True)
    assert "merge" in busy and "remove_orphans" not in busy
    quiet = planned(health(small=s.compact_small_files), s, NOW_MS, orphans_due=True)
    assert quiet == ["compact", "remove_orphans"]
    assert planned(health(), s, NOW_MS, orphans_due=False) == []
