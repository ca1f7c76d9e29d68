"""The CI-sized soak: two and a half minutes of steady load with maintenance on, goals asserted.

The hour-long run (`make soak`) is documented with its figures; this one proves the same
machinery on real components in CI time: no event lost or duplicated, live data files
per day-partition within the goal at every sample, and query latency over a fixed
volume of data not drifting more than a loose bound (a 2-core CI machine shares its
cores with the writer, the maintenance and the producer, so short windows are noisy).
Snapshots are kept 30 s instead of the default, and maintenance passes every 20 s, so
that the short run reaches the steady state a long one reaches (snapshot count and metadata
size flat) after the retention and one pass, within its first half (at the default quarter-second
trigger a minute's retention still grew the log through the second half, and the drift measured
that); the last samples are taken there. Without it the
snapshot log only grows, each snapshot adds to the metadata file every reader parses, and the
drift would measure that growth instead of the table's health.
The click job merges its own small files (``pipeline.merge_seconds``): on two cores shared with the
producer, the broker and the sampler, maintenance at nice 19 cannot rewrite a 1 s writer's files as
fast as they come (a pass over the click table takes longer than the fan-in's worth of triggers), so
the files per partition would measure the machine's idle time; maintenance still compacts the files
the job has left it, which the test asserts too.
Like `make soak` it uses a topic and tables of its own on the stack's broker.
"""

from __future__ import annotations

import math

import pytest

from lab.soak.run import run_soak
from lab.soak.samples import MAX_FILES_PER_PARTITION

pytestmark = [pytest.mark.stack, pytest.mark.slow]


def test_short_soak_stays_small_fast_and_exact(settings, spark, tmp_path):
    s = settings.model_copy(deep=True)
    s.maintenance.interval_seconds = 20
    s.maintenance.snapshot_retention_minutes = 0.5
    s.pipeline.merge_seconds = 10
    result = run_soak(s, rate=1000, duration=150, every=25, out_dir=tmp_path, latency_drift=0.5, spark=spark)
    print(f"soak: {len(result.samples)} samples, drift {result.drift:+.0%}, "
          f"max files/partition {max(x.data_files_max_partition for x in result.samples)}")
    assert result.produced > 135_000
    assert result.rows + result.dead_letters == result.produced  # nothing lost
    assert result.rows == result.distinct_ids  # nothing duplicated
    assert max(x.data_files_max_partition for x in result.samples) <= MAX_FILES_PER_PARTITION
    assert result.failures == [], result.failures
    p95s = [x.freshness_p95_s for x in result.samples if not math.isnan(x.freshness_p95_s)]
    assert p95s and max(p95s) < 60  # seconds-fresh throughout, with maintenance committing beside the writer
    assert sum(x.compact_s for x in result.samples) > 0  # maintenance worked beside the writer, and was timed
    assert sum(x.maintenance_cpu_s for x in result.samples) > 0  # ... and its process tree's CPU was counted
    assert all(x.writer_cpu_s > 0 for x in result.samples if x.under_load)  # the writer's JVM is found and read
    assert all(x.broker_cpu_s > 0 for x in result.samples if x.under_load)  # ... and the broker, by its port
    assert all(x.batch_s_mean > 0 for x in result.samples if x.committed and not math.isnan(x.freshness_p95_s))
    timed = [x for x in result.samples if x.under_load and x.batch_s_mean > 0]
    assert timed and all(x.write_s_mean > 0 for x in timed)  # the batch's phases were timed
    # parts of it (the dead letters commit beside the next batch): a batch that straddles a sample moves a
    # window's phase means apart from its batch mean by a few hundredths, never by a whole phase
    assert all(x.plan_s_mean + x.write_s_mean <= x.batch_s_mean * 1.1 + 0.05 for x in timed)
    assert any(x.dead_letters_s_mean > 0 for x in timed)  # the soak's bad events were dead-lettered, and timed
    assert result.samples[0].under_load and not result.samples[-1].under_load  # drift reads only the load's samples
    assert (tmp_path / "soak.png").stat().st_size > 10_000
    # Expiry held the snapshot log flat: the click batches' appends kept are at most one per trigger for the retention,
    # plus what one maintenance cycle adds before expiry runs again: the interval and the pass itself. A pass can
    # straddle a sample, so its length is bounded by two adjacent windows' maintenance work, as measured (a cold pass
    # compacting at nice 19 on two shared cores can take 50 s). The job's merges and maintenance's own rewrites are
    # snapshots too, and expire by the same rule; they are counted apart (`appends`) so the bound is one a slow machine
    # cannot blur: their number depends on how many compactions a pass found to do.
    m = s.maintenance
    work = [x.compact_s + x.expire_s + x.other_maintenance_s for x in result.samples]
    longest_pass = max(a + b for a, b in zip(work, work[1:]))
    kept = (m.snapshot_retention_minutes * 60 + m.interval_seconds + longest_pass) / s.pipeline.trigger_seconds
    late = [x for x in result.samples if x.elapsed_s > m.snapshot_retention_minutes * 60 + 2 * m.interval_seconds]
    assert late and max(x.appends for x in late) <= kept + m.retain_last_snapshots, ([x.appends for x in late], kept)
