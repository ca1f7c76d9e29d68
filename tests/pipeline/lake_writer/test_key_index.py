"""The dimension writer's key index (pipeline/lake_writer/key_index.py): where each key's live row is."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from pipeline.lake_writer.key_index import ABSENT, KeyIndex, key_hashes


def index_of(keys: list[str], file_number: int = 0) -> KeyIndex:
    return KeyIndex.of_keys(pa.array(keys, pa.large_string()), np.full(len(keys), file_number),
                    np.arange(len(keys)), ["f0", "f1", "f2"])


def test_a_built_index_finds_each_key_and_not_a_stranger():
    index = index_of([f"k{i}" for i in range(1000)])
    files, positions = index.locate(["k7", "k999", "nobody"])
    assert files.tolist() == [0, 0, ABSENT] and positions[:2].tolist() == [7, 999]
    assert len(index) == 1000


def test_updates_deletes_and_new_keys_move_where_keys_are():
    index = index_of(["a", "b", "c"])
    index.assign(["b", "new"], 1, np.array([0, 1]))
    index.remove(["c"])
    files, positions = index.locate(["a", "b", "c", "new"])
    assert files.tolist() == [0, 1, ABSENT, 1] and positions.tolist()[:2] == [0, 0] and positions[3] == 1
    assert len(index) == 3
    index.assign(["c"], 2, np.array([5]))  # a deleted key inserted again
    assert index.locate(["c"])[0].tolist() == [2]


def test_fresh_keys_merged_into_the_base_are_still_found():
    index = index_of([f"k{i}" for i in range(10)])
    index.assign(["x", "y"], 1, np.array([0, 1]))
    assert index.fresh
    index.merge_fresh()
    assert not index.fresh and index.locate(["x", "y", "k3"])[0].tolist() == [1, 1, 0]


def test_a_large_batch_of_new_keys_goes_straight_into_the_sorted_base():
    index = index_of([])
    keys = [f"m{i}" for i in range(5000)]
    index.assign(keys, 0, np.arange(5000))
    assert not index.fresh and len(index) == 5000
    assert (np.diff(index.a.astype(np.float64)) >= 0).all()
    assert index.locate(keys[::997])[1].tolist() == list(range(0, 5000, 997))


def test_two_keys_sharing_the_first_hash_are_told_apart_by_the_second(monkeypatch):
    from pipeline.lake_writer import key_index

    def colliding(keys):  # every key gets the same first hash: lookups must walk the run and compare the second
        a, b = key_hashes(keys)
        return np.full_like(a, 42), b

    monkeypatch.setattr(key_index, "key_hashes", colliding)
    index = index_of(["p", "q", "r"])
    files, positions = index.locate(["p", "q", "r", "s"])
    assert positions[:3].tolist() == [0, 1, 2] and files.tolist() == [0, 0, 0, ABSENT]
    index.assign(["q"], 1, np.array([9]))
    assert index.locate(["p", "q"])[0].tolist() == [0, 1]


def test_rows_in_and_live_per_file_follow_the_moves():
    index = index_of(["a", "b", "c", "d"])
    index.remove(["b"])
    slots, files, positions = index.rows_in([0])
    assert positions.tolist() == [0, 2, 3] and set(files.tolist()) == {0}
    index.move(slots, 2, np.arange(3))
    assert index.live_per_file() == {2: 3}
    assert index.locate(["d"])[1].tolist() == [2]


def test_a_table_holding_a_key_twice_is_refused_with_what_to_do():
    import pytest

    from pipeline.lake_writer.key_index import DuplicateKeys

    with pytest.raises(DuplicateKeys, match="1 keys are held by more than one live row .* of f[01].*snapshot the source"):
        KeyIndex.of_keys(pa.array(["a", "b", "a"], pa.large_string()), np.array([0, 0, 1]), np.array([0, 1, 0]),
                 ["f0", "f1"])


def test_passes_in_pieces_count_and_find_deleted_rows_as_one_pass_would(monkeypatch):
    """Folds count live rows per file and find deleted positions a piece of the index at a time; pieces of three keys
    here, so every piece boundary is crossed, must give what a pass over all the keys gives."""
    from pyiceberg.manifest import DataFile, DataFileContent, FileFormat

    from pipeline.lake_writer import fold, key_index

    monkeypatch.setattr(key_index, "PIECE", 3)
    keys = [f"k{i}" for i in range(20)]
    index = KeyIndex.of_keys(pa.array(keys, pa.large_string()), np.array([i % 3 for i in range(20)]),
                     np.array([i // 3 for i in range(20)]), ["f0", "f1", "f2"])
    index.remove(["k0", "k4", "k5", "k17"])  # f0 loses position 0, f1 position 1, f2 positions 1 and 5
    index.assign(["new"], 2, np.array([7]))  # a fresh key, merged before a pass
    assert index.live_per_file() == {0: 6, 1: 6, 2: 5}
    files = [DataFile.from_args(content=DataFileContent.DATA, file_path=f"f{n}", file_format=FileFormat.PARQUET,
                                record_count=count) for n, count in ((0, 7), (1, 7), (2, 8))]
    deleted = {file.file_path: gone.tolist() for file, gone in fold._deleted_positions(index, files)}
    assert deleted == {"f0": [0], "f1": [1], "f2": [1, 5, 6]}  # f2's position 6 never held a key


def test_a_large_batch_looked_up_in_hash_order_finds_what_single_lookups_find():
    keys = [f"k{i}" for i in range(20_000)]
    index = index_of(keys)
    index.remove(keys[::7])
    asked = [*np.random.default_rng(3).permutation(keys).tolist(), *(f"stranger{i}" for i in range(50))]
    files, positions = index.locate(asked)  # > 1000 keys: the sorted lookup
    one_by_one = [index.locate([k]) for k in asked[:300] + asked[-50:]]
    assert files[:300].tolist() + files[-50:].tolist() == [int(f[0]) for f, _ in one_by_one]
    expected = {k: (ABSENT if i % 7 == 0 else i) for i, k in enumerate(keys)}
    assert [int(p) if f != ABSENT else ABSENT for f, p in zip(files, positions, strict=True)][:-50] == \
        [expected[k] for k in asked[:-50]]
    assert (files[-50:] == ABSENT).all()


def test_a_large_batch_hashed_once_lands_where_the_keyed_calls_put_it():
    by_keys, by_hashes = index_of(["a", "b"]), index_of(["a", "b"])
    keys = ["a", *(f"n{i}" for i in range(3000))]
    numbers = np.where(np.arange(len(keys)) % 2 == 0, 1, ABSENT).astype(np.int32)
    by_keys.assign(keys, numbers, np.arange(len(keys)))
    by_hashes.assign_hashed(*key_hashes(keys), numbers, np.arange(len(keys)))
    probe = ["a", "b", "n0", "n1", "n2999", "n1500"]
    assert [x.tolist() for x in by_keys.locate(probe)] == [x.tolist() for x in by_hashes.locate_hashed(*key_hashes(probe))]
    assert by_keys.locate(["a", "n0"])[0].tolist() == [1, ABSENT] and len(by_keys) == len(by_hashes) == 1 + 1 + 1500
