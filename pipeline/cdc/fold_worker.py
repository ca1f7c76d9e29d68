"""Where a fold's files are written: a process of its own, at a lower CPU priority than the apply.

Why not a thread of the apply (measured, 10 M rows, 1,000 changes/s): while a fold was
written beside them, the batch it overlapped took 6.3-9.1 s instead of 0.5 s, and freshness
p95 stayed at 3.8-5.8 s. The fold's thread and the Arrow threads its reads and writes use ran
on both cores at the priority of the batch, the capture and the database. In a process of its
own, reniced (``os.nice(10)``), the fold takes what they leave. A spawned process, not a fork:
the apply holds Kafka client threads and locks a fork would copy mid-use. The plan goes in and
the written files come back pickled (tens of MB at most); nothing is committed there.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
from concurrent.futures import Future, ProcessPoolExecutor

from pipeline.cdc.fold import FoldPlan, write_fold

log = logging.getLogger(__name__)

#: how much lower than the apply the fold runs (nice increment)
NICENESS = 10


def _lower_priority() -> None:
    os.nice(NICENESS)


class FoldWorker:
    """One fold at a time in a spawned, reniced process, started at the first fold and kept."""

    def __init__(self) -> None:
        self._pool: ProcessPoolExecutor | None = None

    def submit(self, plan: FoldPlan, io, locations, key: str, target_rows: int) -> Future:
        if self._pool is None:
            self._pool = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"),
                                             initializer=_lower_priority)
        return self._pool.submit(write_fold, plan, io, locations, key, target_rows)

    def reset(self) -> None:
        """Drop the process (after it failed): the next fold starts a new one."""
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
