"""Which files a fold rewrites (pipeline/lake_writer/fold.py): much-deleted ones, the most deleted first, and small
ones a size tier at a time, within the rows one fold may rewrite; and when the writer folds (live_rows.FileCounts)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
from pyiceberg.typedef import Record

from pipeline.lake_writer.fold import FoldPolicy, _to_rewrite
from pipeline.lake_writer.key_index import KeyIndex
from pipeline.lake_writer.live_rows import FileCounts


def data_file(path: str, rows: int, content: DataFileContent = DataFileContent.DATA) -> DataFile:
    return DataFile.from_args(content=content, file_path=path, file_format=FileFormat.PARQUET, partition=Record(),
                              record_count=rows, file_size_in_bytes=rows)


def index_with(live: dict[str, int]) -> KeyIndex:
    keys, numbers, positions, files = [], [], [], list(live)
    for number, (path, count) in enumerate(live.items()):
        keys += [f"{path}-{i}" for i in range(count)]
        numbers += [number] * count
        positions += list(range(count))
    return KeyIndex.of_keys(pa.array(keys, pa.large_string()), np.array(numbers), np.array(positions), files)


def test_much_deleted_files_are_rewritten_the_most_deleted_first_within_the_budget():
    policy = FoldPolicy(target_rows=100, rewrite_deleted_share=0.10, max_rewrite_rows=250, tier_fan_in=3)
    files = [data_file("big-clean", 100), data_file("big-5pc", 100), data_file("big-50pc", 100),
             data_file("big-30pc", 100), data_file("small", 20)]
    index = index_with({"big-clean": 100, "big-5pc": 95, "big-50pc": 50, "big-30pc": 70, "small": 20})
    chosen = [f.file_path for f in _to_rewrite(files, index, policy)]
    assert chosen == ["big-50pc", "big-30pc"]  # big-5pc is under the share; one small file waits for its tier


def test_small_files_are_merged_a_tier_at_a_time_once_enough_of_a_similar_size_gathered():
    """Batch files merge into a tier-1 file; tier-1 files wait until there are ``tier_fan_in`` of them."""
    policy = FoldPolicy(target_rows=10_000, tier_fan_in=3, tier_ratio=4)
    batches = [data_file(f"batch-{i}", 10 + i) for i in range(4)]  # 10-13 rows: one tier
    tier_1 = [data_file(f"tier1-{i}", 300) for i in range(2)]  # only two of their size: not yet
    files = batches + tier_1
    index = index_with({f.file_path: f.record_count for f in files})
    assert sorted(f.file_path for f in _to_rewrite(files, index, policy)) == [f"batch-{i}" for i in range(4)]
    files.append(data_file("tier1-2", 280))
    index = index_with({f.file_path: f.record_count for f in files})
    chosen = {f.file_path for f in _to_rewrite(files, index, policy)}
    assert chosen == {f.file_path for f in files}  # the third tier-1 file completes that tier too


def test_the_writer_folds_after_so_many_batches_whatever_delete_files_the_last_fold_left():
    policy = FoldPolicy(fold_files=3, target_rows=100)
    deletes_left = [type("Entry", (), {"data_file": data_file(f"d{i}", 5, DataFileContent.POSITION_DELETES)})()
                    for i in range(10)]
    counts = FileCounts.of(deletes_left, policy)  # a fold left a delete file per data file: not a reason to fold
    assert counts.deletes == 10 and not counts.due(policy)
    counts.added(data_file("a", 10), True, policy)
    counts.added(data_file("b", 500), True, policy)
    assert not counts.due(policy)
    counts.added(None, True, policy)
    assert counts.due(policy) and (counts.small_data, counts.deletes) == (1, 13)


def test_small_tiers_are_not_starved_by_large_files_waiting_for_their_deletes():
    """At 10 M rows every large file crosses the share at about the same time: their rewrites alone would fill
    every fold's budget while the batches' small files piled up."""
    policy = FoldPolicy(target_rows=100, rewrite_deleted_share=0.03, max_rewrite_rows=200, tier_fan_in=3)
    large = [data_file(f"big-{i}", 100) for i in range(4)]
    batches = [data_file(f"batch-{i}", 5) for i in range(3)]
    index = index_with({**{f.file_path: 90 for f in large}, **{f.file_path: 5 for f in batches}})
    chosen = [f.file_path for f in _to_rewrite(large + batches, index, policy)]
    assert chosen[:3] == ["batch-0", "batch-1", "batch-2"] and chosen[3:] == ["big-0"]  # 15 + 100 rows; big-1 > 200
