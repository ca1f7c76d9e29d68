"""Keeping a long-running Python process's resident memory near what it uses, not what it once used.

Why: the CDC apply at 10 M keys holds a 240 MB key index and, every few minutes, a fold of up
to 1.5 M rows in a background thread (Arrow tables, NumPy arrays of a few MB each). glibc's
allocator keeps what such a process frees: each thread gets an arena of its own (up to eight per
core), and after the first large array is freed it raises its mmap threshold to 32 MB, so every
array below that comes from an arena afterwards and stays resident once freed. The sum of
those freed-but-kept pages is what pushed the apply's peak RSS past 1 GiB while folds ran
(docs/cdc.md, "The apply's memory, profiled").

``keep_resident_small()`` fixes the mmap threshold (arrays above it are mapped and unmapped,
given back at once); ``give_back_freed()`` returns the arenas' free pages after a large step.
The arenas are not capped: two arenas for the apply's threads and librdkafka's made a 1 M-row
snapshot slower (36-43 s against 30-32 s with the threshold alone, 36-38 s with neither;
docs/cdc.md). Both are no-ops off glibc (macOS, musl): the process works the same there,
only with the allocator's defaults.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
from functools import cache

import pyarrow as pa

log = logging.getLogger(__name__)

#: glibc's mallopt parameters (malloc.h)
M_MMAP_THRESHOLD = -3

#: arrays above this are mapped on their own and unmapped when freed (a fixed value also stops glibc raising it)
MMAP_THRESHOLD = 1 << 20


@cache
def _libc() -> ctypes.CDLL | None:
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        libc = ctypes.CDLL(name)
        libc.mallopt, libc.malloc_trim  # noqa: B018 - glibc has both; musl and macOS do not
        libc.malloc_trim.argtypes = [ctypes.c_size_t]
    except (OSError, AttributeError):
        return None
    return libc


def keep_resident_small() -> bool:
    """Set the allocator so freed large arrays leave the process; True when it took effect (glibc).

    Call it early: what was allocated before stays where it is.
    """
    libc = _libc()
    if libc is None:
        log.debug("not glibc: the allocator's defaults stay")
        return False
    if not libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD):
        log.warning("mallopt refused the mmap threshold: the allocator's defaults stay")
        return False
    return True


def give_back_freed() -> None:
    """Return the free pages the allocators hold to the system (after a step that freed many): glibc's, in every
    arena, and Arrow's pool's."""
    libc = _libc()
    if libc is not None:
        libc.malloc_trim(0)
    pa.default_memory_pool().release_unused()
