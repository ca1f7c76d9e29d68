"""CDC at (small) scale, end to end on the real stack: generated members loaded into MariaDB, the capture's
streamed snapshot with writes during it, merge-on-read changes, kill -9 of the capture and of the apply
job during the snapshot and during the changes — and the lake equal to MariaDB afterwards."""

from __future__ import annotations

from lab.bench.cdc_scale import run


def test_kill_9_of_capture_and_apply_at_scale_loses_and_doubles_nothing(settings):
    # 60,000 members: enough for a snapshot of several batches, each spread over the buckets
    result = run(settings, 60_000, rate=300, duration=24, progress=lambda _: None, engines=("duckdb",), chaos=True)
    assert len(result.kills) == 5  # two during the snapshot, two during the changes, the apply's timed restart
    # the timed restart ran to its end: a peak memory read from the kernel, a time (NaN until measured)
    assert result.kills[-1] == "dims after the changes" and result.restart_s < 600 and result.restart_rss_mb > 50
    assert result.fingerprints["duckdb"] == result.fingerprints["mariadb"]
    rows, _, _, marks, _ = result.fingerprints["mariadb"]
    assert rows > 50_000 and marks > 0  # the table and the run's changes are there to compare
    assert result.sample_differences == {"duckdb": 0}
