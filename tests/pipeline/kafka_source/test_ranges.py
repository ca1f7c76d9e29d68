"""Cutting a batch's offset ranges into balanced tasks (pure logic: no services)."""

from __future__ import annotations

import pytest

from pipeline.kafka_source.batch_job import Batch
from pipeline.kafka_source.ranges import OffsetRange, balance, pieces


def _covered(groups):
    return sorted((r.topic, r.partition, o) for g in groups for r in g for o in range(r.start, r.end))


@pytest.mark.parametrize("sizes,tasks", [((13_000, 13_000, 13_000), 2), ((30_000, 10, 0), 2),
                                         ((5, 7, 9), 4), ((1000, 2000, 3000, 4000), 3), ((0, 0), 2)])
def test_every_offset_lands_in_exactly_one_task_and_tasks_are_even(sizes, tasks):
    ranges = [OffsetRange("t", p, 100 * p, 100 * p + n) for p, n in enumerate(sizes)]
    groups = balance(ranges, tasks)
    assert _covered(groups) == _covered([ranges])
    assert len(groups) <= tasks
    counts = [sum(r.size for r in g) for g in groups]
    if counts:
        assert len(set(counts[:-1])) <= 1 and 0 < counts[-1] <= counts[0]  # equal shares, the last takes the rest
        assert all(r.size > 0 for g in groups for r in g)


def test_three_full_partitions_on_two_cores_make_two_equal_tasks():
    ranges = [OffsetRange("t", p, 0, 13_000) for p in range(3)]
    groups = balance(ranges, 2)
    assert [sum(r.size for r in g) for g in groups] == [19_500, 19_500]
    assert groups[0][-1] == OffsetRange("t", 1, 0, 6_500) and groups[1][0] == OffsetRange("t", 1, 6_500, 13_000)


def test_small_batches_stay_in_one_task():
    ranges = [OffsetRange("t", p, 0, 200) for p in range(3)]
    assert len(balance(ranges, 8)) == 1


def test_a_batch_resumes_where_it_ends_and_reads_only_ranges_with_records():
    ranges = [OffsetRange("clicks", 0, 10, 25), OffsetRange("clicks", 1, 7, 7), OffsetRange("orders", 0, 0, 3)]
    batch = Batch(ranges, marks={}, began=0.0, planned_at=0.0)
    assert batch.work == [ranges[0], ranges[2]]
    assert batch.start == {"clicks": {0: 10, 1: 7}, "orders": {0: 0}}
    assert batch.end == {"clicks": {0: 25, 1: 7}, "orders": {0: 3}}  # an empty partition stays where it was


@pytest.mark.parametrize(("sizes", "most"), [([250_000, 0, 90_001], 100_000), ([10, 20], 100_000), ([7, 7, 7], 5)])
def test_turns_cover_every_offset_once_each_starting_where_the_last_ended(sizes, most):
    ranges = [OffsetRange("t", p, 1_000, 1_000 + n) for p, n in enumerate(sizes)]
    turns = pieces(ranges, most)
    assert len(turns) == max(1, -(-sum(sizes) // most))
    for turn in turns:
        assert sum(r.size for r in turn) <= most + len(ranges)  # a slice per range, rounded
        assert [r.partition for r in turn] == [r.partition for r in ranges]
    for before, after in zip(turns, turns[1:], strict=False):
        assert [r.end for r in before] == [r.start for r in after], "each turn goes on where the last ended"
    assert [t.start for t in turns[0]] == [r.start for r in ranges]
    assert [t.end for t in turns[-1]] == [r.end for r in ranges]
