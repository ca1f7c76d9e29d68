"""Which of the click job's files wait for a merge, and when a merge is due (``PendingFiles``)."""

from __future__ import annotations

import pyarrow as pa
from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
from pyiceberg.typedef import Record

from pipeline.clicks.file_merges import MERGE_BYTES, MergeGroup, PendingFiles
from pipeline.clicks.task import KeptRows


def data_file(name: str, day: int = 20_000, size: int = 10_000) -> DataFile:
    """A data file of the click table's one partition spec (0) in the day-partition ``day``."""
    file = DataFile.from_args(content=DataFileContent.DATA, file_path=f"s3://w/{name}.parquet",
                              file_format=FileFormat.PARQUET, partition=Record(day), record_count=10,
                              file_size_in_bytes=size)
    file.spec_id = 0
    return file


def test_a_partitions_batch_files_merge_after_the_interval_and_a_lone_one_is_promoted():
    pending = PendingFiles(merge_seconds=10, fan_in=3)
    pending.add_batch_files([data_file("a1"), data_file("b1", day=19_999)], now=0)
    pending.add_batch_files([data_file("a2")], now=5)
    assert pending.take_due(now=9) == []
    due = pending.take_due(now=10)
    assert [(g.level, g.partition, [f.file_path for f in g.files]) for g in due] == [
        (0, (0, (20_000,)), ["s3://w/a1.parquet", "s3://w/a2.parquet"])]
    assert pending.waiting() == 1  # b1, alone in its partition, is promoted to the first level as it is
    assert pending.take_due(now=100) == []


def test_many_batch_files_merge_before_the_interval():
    pending = PendingFiles(merge_seconds=10, fan_in=3)
    pending.add_batch_files([data_file(f"f{i}") for i in range(11)], now=0)
    assert pending.take_due(now=1) == []
    pending.add_batch_files([data_file("f11")], now=1)  # 4 x fan-in
    assert [len(g.files) for g in pending.take_due(now=1)] == [12]


def test_first_level_files_merge_at_the_fan_in_and_the_second_level_leaves_the_job():
    pending = PendingFiles(merge_seconds=1, fan_in=3)
    for i in range(3):
        group = MergeGroup(0, (0, (20_000,)), (data_file(f"x{i}"), data_file(f"y{i}")))
        pending.add_merged(group, [data_file(f"m{i}")], now=0)
    due = pending.take_due(now=0)
    assert [(g.level, len(g.files)) for g in due] == [(1, 3)]
    pending.add_merged(due[0], [data_file("big")], now=0)
    assert pending.waiting() == 0  # maintenance's from here


def test_first_level_files_merge_early_once_their_bytes_reach_the_cap_and_a_large_one_leaves_at_once():
    pending = PendingFiles(merge_seconds=1, fan_in=10)
    group = MergeGroup(0, (0, (20_000,)), (data_file("x"), data_file("y")))
    pending.add_merged(group, [data_file("large", size=MERGE_BYTES)], now=0)
    assert pending.waiting() == 0
    pending.add_merged(group, [data_file("h1", size=MERGE_BYTES // 2)], now=0)
    pending.add_merged(group, [data_file("h2", size=MERGE_BYTES // 2)], now=0)
    assert [(g.level, len(g.files)) for g in pending.take_due(now=0)] == [(1, 2)]


def test_large_batch_files_never_wait_and_first_level_files_past_the_horizon_are_left_to_maintenance():
    pending = PendingFiles(merge_seconds=10, fan_in=3)  # horizon 50 s
    pending.add_batch_files([data_file("large", size=MERGE_BYTES)], now=0)
    assert pending.waiting() == 0
    pending.add_batch_files([data_file("a", size=MERGE_BYTES // 2), data_file("b", size=MERGE_BYTES // 2)], now=0)
    assert [(g.level, len(g.files)) for g in pending.take_due(now=0)] == [(0, 2)]  # their bytes, before the time
    group = MergeGroup(0, (0, (20_000,)), (data_file("x"), data_file("y")))
    pending.add_merged(group, [data_file("m1")], now=0)
    assert pending.take_due(now=39) == [] and pending.waiting() == 1
    assert pending.take_due(now=40) == [] and pending.waiting() == 0  # maintenance may take it by the time a merge


def test_each_tasks_batch_files_merge_apart_and_the_first_level_pools_them():
    pending = PendingFiles(merge_seconds=10, fan_in=2)
    pending.add_batch_files([data_file("a1"), data_file("a2")], now=0, task=0)
    pending.add_batch_files([data_file("b1"), data_file("b2")], now=0, task=1)
    due = pending.take_due(now=10)
    assert sorted((g.level, g.task, [f.file_path[7:] for f in g.files]) for g in due) == [
        (0, 0, ["a1.parquet", "a2.parquet"]), (0, 1, ["b1.parquet", "b2.parquet"])]
    for group, name in zip(due, ("ma", "mb"), strict=True):
        pending.add_merged(group, [data_file(name)], now=10)
    second = pending.take_due(now=10)  # the two tasks' first-level files, in one partition, reach the fan-in
    assert [(g.level, g.task, len(g.files)) for g in second] == [(1, None, 2)]


def test_a_task_keeps_the_newest_rows_within_its_limit_and_gives_each_once():
    rows = pa.table({"x": pa.array(range(1000), pa.int64())})  # 8,000 bytes
    kept = KeptRows(limit=20_000)
    for name in ("a", "b", "c"):
        kept.keep(name, rows)
    assert list(kept.take(["a", "b", "c", "d"])) == ["b", "c"]  # the oldest went past the limit; d never came
    assert kept.take(["b", "c"]) == {}
    kept.keep("e", rows)
    kept.clear()
    assert kept.take(["e"]) == {}
