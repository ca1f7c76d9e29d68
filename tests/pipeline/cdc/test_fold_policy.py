"""Which files a fold rewrites (pipeline/cdc/fold.py): small ones and much-deleted ones, the most deleted
first, within the rows one fold may rewrite; and when the writer folds (live_rows.FileCounts)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
from pyiceberg.typedef import Record

from pipeline.cdc.fold import FoldPolicy, _to_rewrite
from pipeline.cdc.key_index import KeyIndex
from pipeline.cdc.live_rows import FileCounts


def data_file(path: str, rows: int, content: DataFileContent = DataFileContent.DATA) -> DataFile:
    return DataFile.from_args(content=content, file_path=path, file_format=FileFormat.PARQUET, partition=Record(),
                              record_count=rows, file_size_in_bytes=rows)


def index_with(live: dict[str, int]) -> KeyIndex:
    keys, numbers, positions, files = [], [], [], list(live)
    for number, (path, count) in enumerate(live.items()):
        keys += [f"{path}-{i}" for i in range(count)]
        numbers += [number] * count
        positions += list(range(count))
    return KeyIndex(pa.array(keys, pa.large_string()), np.array(numbers), np.array(positions), files)


def test_small_and_much_deleted_files_are_rewritten_the_most_deleted_first_within_the_budget():
    policy = FoldPolicy(target_rows=100, rewrite_deleted_share=0.10, max_rewrite_rows=250)
    files = [data_file("big-clean", 100), data_file("big-5pc", 100), data_file("big-50pc", 100),
             data_file("big-30pc", 100), data_file("small", 20)]
    index = index_with({"big-clean": 100, "big-5pc": 95, "big-50pc": 50, "big-30pc": 70, "small": 20})
    chosen = [f.file_path for f in _to_rewrite(files, index, policy)]
    assert chosen == ["big-50pc", "big-30pc", "small"]  # 220 rows; big-5pc is under the share, big-clean clean


def test_the_writer_folds_once_either_count_reaches_the_policy():
    policy = FoldPolicy(fold_files=3, target_rows=100)
    counts = FileCounts.of([], policy)
    counts.added(data_file("a", 10), True, policy)
    counts.added(data_file("b", 500), True, policy)  # not small: only its delete file counts
    assert not counts.due(policy)
    counts.added(None, True, policy)
    assert counts.due(policy) and (counts.small_data, counts.deletes) == (1, 3)
