"""Where each key's live row is: key -> (data file, row position), for millions of keys in little memory.

Why the dimension writer keeps one: a merge-on-read update deletes the old row by its
*position* (data file, row number), and a position delete is the one kind of delete every
reader here reads (PyIceberg 0.12 raises on equality deletes; docs/cdc.md). Knowing where
each key lives also means no delete is written for a key no file holds (seed 004's Bloom
filter, made exact). Asking the table instead would read the key column of every file a
batch's keys may fall in: with random keys, every file, every batch.

Keys are held as two independent 64-bit hashes (DuckDB's ``hash`` and the low half of the
key's MD5), not as strings: 10 M keys take 240 MB (two hashes, file number, position: 24 bytes
a key) instead of ~1.5 GB of Python strings. Two keys match only when both hashes do; for two
different keys among 10 M to share both is a chance of about 1 in 10^24. (A salted second
``hash`` would not do: DuckDB combines the salt's hash with the key's, so equal first hashes
would mean equal second ones.) The hashes live only in this process, so the hash functions may
change with DuckDB's version without harm. A table holding one key twice is refused
(``DuplicateKeys``): position deletes would remove only one of the two.

Layout: ``base`` arrays sorted by the first hash (looked up with a binary search, updated in
place), and ``fresh`` keys never seen when the base was built (a dict, merged into the base
once it grows). A deleted key keeps its slot with file -1.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import duckdb
import numpy as np
import pyarrow as pa

from lakehouse.errors import FatalError

ABSENT = -1

#: keys a pass over the whole index works on at a time: at 10 M keys, one pass over all of them at once made
#: ~240 MB of temporaries, the apply's peak memory (profiled); a piece's are a few MB
PIECE = 1 << 20


class DuplicateKeys(FatalError):
    """The table holds a key in more than one live row: the writer cannot keep it right, so it stops."""


_connections = threading.local()


def _duckdb() -> duckdb.DuckDBPyConnection:
    """This thread's in-memory DuckDB: opening one takes ~13 ms, as long as hashing a batch's keys (profiled)."""
    con = getattr(_connections, "con", None)
    if con is None:
        con = _connections.con = duckdb.connect()
    return con


def key_hashes(keys: pa.Array | list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Two independent 64-bit hashes of each key, as uint64 arrays."""
    table = pa.table({"k": pa.array(keys, type=pa.large_string()) if isinstance(keys, list) else keys})
    hashed = _duckdb().from_arrow(table).project("hash(k) AS a, md5_number_lower(k) AS b").to_arrow_table()
    return (hashed.column("a").to_numpy().astype(np.uint64, copy=False),
            hashed.column("b").to_numpy().astype(np.uint64, copy=False))


class KeyIndex:
    """key -> (file number, position) of the key's live row; ``files`` names the file numbers.

    Built from the keys' hashes (``of_keys`` hashes the keys first). The arrays given are the
    index's own from then on, sorted in place: at 10 M keys a sorted copy of each was 240 MB
    more at the apply's start (``live_rows.read_index``).
    """

    def __init__(self, a: np.ndarray, b: np.ndarray, file_numbers: np.ndarray, positions: np.ndarray,
                 files: list[str]):
        self.a, self.b = a, b
        self.file = np.asarray(file_numbers, dtype=np.int32)
        self.pos = np.asarray(positions, dtype=np.int32)
        order = np.lexsort((b, a))
        for array in (self.a, self.b, self.file, self.pos):
            array[:] = array[order]  # one temporary copy at a time
        del order
        twice = np.flatnonzero((self.a[1:] == self.a[:-1]) & (self.b[1:] == self.b[:-1]))
        if len(twice):
            raise DuplicateKeys(
                f"{len(twice):,} keys are held by more than one live row (e.g. the row at position "
                f"{int(self.pos[twice[0]])} of {files[int(self.file[twice[0]])]}): the dimension table does not "
                "match its key. Rebuild it from the source: delete the table and the capture's position topic, "
                "then start the capture and the apply again (they snapshot the source)")
        self.fresh: dict[tuple[int, int], tuple[int, int]] = {}
        self.files = list(files)
        self.numbers = {path: i for i, path in enumerate(self.files)}

    @classmethod
    def of_keys(cls, keys: pa.Array | list[str], file_numbers, positions, files: list[str]) -> KeyIndex:
        """An index of ``keys`` living at (file number, position); the arrays are copied, not taken."""
        a, b = key_hashes(keys) if len(keys) else (np.empty(0, np.uint64), np.empty(0, np.uint64))
        return cls(a.copy(), b.copy(), np.array(file_numbers, dtype=np.int32), np.array(positions, dtype=np.int32),
                   files)

    def __len__(self) -> int:
        return int(np.count_nonzero(self.file != ABSENT)) + sum(1 for f, _ in self.fresh.values() if f != ABSENT)

    def number(self, path: str) -> int:
        """The file number of ``path``, given one on first sight."""
        if path not in self.numbers:
            self.numbers[path] = len(self.files)
            self.files.append(path)
        return self.numbers[path]

    def slots(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Each key's slot in the base arrays, or -1 when the base does not hold it (keys by their two hashes).

        A large batch is looked up in hash order: consecutive binary searches then walk nearby parts of the
        base, which stay in the CPU's cache (random order was ~10 % of the apply's time in a 10 M-row snapshot).
        """
        if len(a) > 1000:
            order = np.argsort(a)
            slots = np.empty(len(a), dtype=np.int64)
            slots[order] = np.searchsorted(self.a, a[order])
        else:
            slots = np.searchsorted(self.a, a)
        found = np.full(len(a), -1, dtype=np.int64)
        if not len(self.a):
            return found
        at = np.minimum(slots, len(self.a) - 1)
        same_a = self.a[at] == a
        exact = same_a & (self.b[at] == b)
        found[exact] = at[exact]
        for i in np.flatnonzero(same_a & ~exact):
            j = int(slots[i]) + 1
            while j < len(self.a) and self.a[j] == a[i]:  # several keys share a first hash: rare
                if self.b[j] == b[i]:
                    found[i] = j
                    break
                j += 1
        return found

    def locate(self, keys: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """(file number, position) of each key's live row; file number -1 for a key no file holds."""
        return self.locate_hashed(*key_hashes(keys))

    def locate_hashed(self, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``locate`` for keys given by their hashes (``key_hashes``: a batch hashes its keys once)."""
        slots = self.slots(a, b)
        in_base = slots >= 0
        files = np.full(len(a), ABSENT, dtype=np.int32)
        positions = np.zeros(len(a), dtype=np.int32)
        files[in_base], positions[in_base] = self.file[slots[in_base]], self.pos[slots[in_base]]
        if self.fresh:  # none between snapshot batches: a Python loop over 200,000 new keys was 13 % of the apply
            for i in np.flatnonzero(~in_base):  # holding the interpreter lock (py-spy --gil, 1 M-row snapshot)
                files[i], positions[i] = self.fresh.get((int(a[i]), int(b[i])), (ABSENT, 0))
        return files, positions

    def assign(self, keys: list[str], file_number: int | np.ndarray, positions: np.ndarray) -> None:
        """Record where ``keys`` (distinct) now live (file -1: deleted)."""
        self.assign_hashed(*key_hashes(keys), file_number, positions)

    def assign_hashed(self, a: np.ndarray, b: np.ndarray, file_number: int | np.ndarray, positions: np.ndarray) -> None:
        """``assign`` for keys given by their hashes."""
        numbers = np.broadcast_to(np.asarray(file_number, dtype=np.int32), (len(a),))
        positions = np.asarray(positions, dtype=np.int32)
        if len(a) > 1000:  # a large batch (the initial snapshot): everything into the base, vectorised
            self.merge_fresh()
        slots = self.slots(a, b)
        in_base = slots >= 0
        self.file[slots[in_base]], self.pos[slots[in_base]] = numbers[in_base], positions[in_base]
        new = np.flatnonzero(~in_base)
        if len(new) > 1000:
            self._insert(a[new], b[new], numbers[new], positions[new])
            return
        for i in new:
            self.fresh[(int(a[i]), int(b[i]))] = (int(numbers[i]), int(positions[i]))
        if len(self.fresh) > max(100_000, len(self.a) // 20):
            self.merge_fresh()

    def remove(self, keys: list[str]) -> None:
        self.assign(keys, ABSENT, np.zeros(len(keys), dtype=np.int32))

    def merge_fresh(self) -> None:
        """Fold the fresh keys into the sorted base."""
        if not self.fresh:
            return
        count = len(self.fresh)
        a = np.fromiter((k[0] for k in self.fresh), np.uint64, count)
        b = np.fromiter((k[1] for k in self.fresh), np.uint64, count)
        numbers = np.fromiter((v[0] for v in self.fresh.values()), np.int32, count)
        positions = np.fromiter((v[1] for v in self.fresh.values()), np.int32, count)
        self.fresh = {}
        self._insert(a, b, numbers, positions)

    def _insert(self, a: np.ndarray, b: np.ndarray, numbers: np.ndarray, positions: np.ndarray) -> None:
        """Keys the base does not hold into it, kept sorted (one merge of sorted arrays, no full sort)."""
        order = np.lexsort((b, a))
        a, b, numbers, positions = a[order], b[order], numbers[order], positions[order]
        at = np.searchsorted(self.a, a)
        # one array at a time: the copy np.insert makes is the peak of a 10 M-key snapshot, so keep it to one array
        self.a = np.insert(self.a, at, a)
        self.b = np.insert(self.b, at, b)
        self.file = np.insert(self.file, at, numbers)
        self.pos = np.insert(self.pos, at, positions)

    def rows_in(self, file_numbers: list[int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(slot, file number, position) of every live row in those files, ordered by file then position."""
        self.merge_fresh()
        wanted = np.zeros(len(self.files) + 1, dtype=bool)  # one more: a deleted key's file -1 reads the last, False
        wanted[np.asarray(file_numbers, dtype=np.int64)] = True
        slots = np.flatnonzero(wanted[self.file])  # a table lookup per key: np.isin compared each with every number
        order = np.lexsort((self.pos[slots], self.file[slots]))
        slots = slots[order]
        return slots, self.file[slots], self.pos[slots]

    def pieces(self) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """(file numbers, positions) of every key, ``PIECE`` keys at a time (views of the base, no copies)."""
        self.merge_fresh()
        for lo in range(0, len(self.file), PIECE):
            yield self.file[lo:lo + PIECE], self.pos[lo:lo + PIECE]

    def move(self, slots: np.ndarray, file_number: int, positions: np.ndarray) -> None:
        """Rows rewritten into another file (a fold): their slots from ``rows_in``."""
        self.file[slots], self.pos[slots] = file_number, positions

    def live_per_file(self) -> dict[int, int]:
        """How many live rows each file number holds."""
        counts = np.zeros(len(self.files), dtype=np.int64)
        for files, _ in self.pieces():  # O(n): no sort of 10 M keys
            counts += np.bincount(files[files != ABSENT], minlength=len(self.files))
        numbers = np.flatnonzero(counts)
        return dict(zip(numbers.tolist(), counts[numbers].tolist(), strict=True))

    @property
    def nbytes(self) -> int:
        return self.a.nbytes + self.b.nbytes + self.file.nbytes + self.pos.nbytes
