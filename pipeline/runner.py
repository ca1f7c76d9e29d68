"""The micro-batch loop shared by every Kafka-reading job.

A job exposes ``run_once() -> int`` (records committed; 0 = idle) and ``recover()``
(re-read its committed offsets from the table after a failure, since a failed batch
may or may not have committed), plus the ``tables`` it writes: while the loop runs,
locks that dead writers left on them are freed (``pipeline.commit_locks``). The loop
triggers every ``trigger_seconds``, retries a failed batch under the project's one retry
policy (``lakehouse.errors.Backoff``: a broker or object store restarting is waited out,
not fatal), and on SIGINT/SIGTERM stops after the batch in flight. A job that reads a
table another job of the same process writes names its commit event as ``wake``
(``pipeline.table_commits``): its next batch starts when that table commits, the trigger
being the longest wait.
"""
from __future__ import annotations

import logging
import shutil
import signal
import threading
import time
from pathlib import Path
from typing import Protocol

from lakehouse.errors import Backoff
from lakehouse.settings import Settings
from pipeline import metrics
from pipeline.commit_locks import StaleLockReaper

log = logging.getLogger(__name__)


class MicroBatchJob(Protocol):
    name: str
    settings: Settings
    tables: list[str]

    def run_once(self) -> int: ...

    def recover(self) -> None: ...


def install_stop_handlers(stop: threading.Event) -> None:
    """Ctrl-C / SIGTERM ask the loop to finish the current batch and return."""

    def handler(signum, _frame):
        log.warning("signal %s: stopping after the current batch", signum)
        stop.set()

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, handler)
        signal.signal(signal.SIGTERM, handler)


def run_loop(job: MicroBatchJob, trigger_seconds: float, stop: threading.Event,
             max_batches: int | None = None, max_backoff: float = 30.0) -> int:
    """Run batches until stopped (or ``max_batches`` non-idle batches); return batches run."""
    with StaleLockReaper(job.settings, job.tables):
        return _loop(job, trigger_seconds, stop, max_batches, max_backoff)


def _describe(exc: BaseException) -> str:
    """One line naming the real cause, not a wrapper.

    For a JVM error that is the Java exception rather than py4j's wrapper; for an error
    raised in a Python worker (PySpark's PythonException, whose text opens with a blank
    line and a banner) it is the traceback's last line, the worker's own exception.
    """
    java = getattr(exc, "java_exception", None)
    if java is not None:
        lines = [line.strip() for line in str(java.toString()).splitlines() if line.strip()]
        return (lines or [""])[0][:300]
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    if any(line.startswith("Traceback (most recent call last)") for line in lines):
        cause = lines[-1]
    else:
        cause = lines[0] if lines else ""
    return f"{type(exc).__name__}: {cause}"[:300]


class DiskFloor:
    """Holds batches back while the run directory's disk is nearly full.

    On the local stack the object store, broker log and databases live in the run
    directory: a batch started on a full disk fails somewhere inside a commit. Waiting
    with one clear message (and one when space is back) is kinder and loses nothing.
    """

    def __init__(self, job_name: str, path: Path, floor_mb: int):
        self.job_name, self.path, self.floor_mb = job_name, path, floor_mb
        self.waiting = False

    def free_mb(self) -> float:
        probe = self.path if self.path.exists() else Path(self.path.anchor or "/")
        return shutil.disk_usage(probe).free / 2**20

    def blocks(self) -> bool:
        free = self.free_mb()
        low = free < self.floor_mb
        if low and not self.waiting:
            log.error("%s: only %.0f MiB free on the disk of %s, below pipeline.min_free_disk_mb=%d; no new batch "
                      "until space is freed (free disk space there, or lower LAKEHOUSE_PIPELINE__MIN_FREE_DISK_MB)",
                      self.job_name, free, self.path, self.floor_mb)
        elif not low and self.waiting:
            log.warning("%s: %.0f MiB free on the disk of %s again; resuming", self.job_name, free, self.path)
        self.waiting = low
        return low


def _loop(job: MicroBatchJob, trigger_seconds: float, stop: threading.Event,
          max_batches: int | None, max_backoff: float) -> int:
    batches = 0
    disk = DiskFloor(job.name, job.settings.run_dir, job.settings.pipeline.min_free_disk_mb)
    recovering = False  # after a failure no batch runs before the job knows again where its tables stand

    def failed(exc: BaseException, pause: float) -> None:
        nonlocal recovering
        metrics.set_ready(job.name, False)
        if recovering:
            log.error("%s: recovery failed (%s); trying again in %.0fs", job.name, _describe(exc), pause)
            return
        metrics.BATCHES.labels(job.name, "failed").inc()
        log.error("%s: batch failed (%s); retrying in %.0fs from the committed offsets", job.name, _describe(exc), pause)
        recovering = True

    while not stop.is_set():
        began = time.monotonic()
        if disk.blocks():
            stop.wait(max(trigger_seconds, 1.0))
            continue
        wake: threading.Event | None = getattr(job, "wake", None)
        rows: int | None = None
        try:
            for attempt in Backoff(stop, failed, longest=max_backoff):
                with attempt:
                    if recovering:  # the failed batch may have committed: a plan from stale offsets writes it twice
                        job.recover()
                        recovering = False
                    if wake is not None:
                        wake.clear()  # the batch reads every commit so far: only later ones wake the next
                    rows = job.run_once()
        except Exception as exc:
            metrics.set_ready(job.name, False)
            metrics.BATCHES.labels(job.name, "failed").inc()
            log.error("%s: %s; stopping (a retry cannot fix this)", job.name, _describe(exc))
            raise
        if rows is None:  # stopped while the batch was failing
            metrics.set_ready(job.name, False)
            break
        metrics.set_ready(job.name, True)
        if rows:
            batches += 1
            if max_batches is not None and batches >= max_batches:
                break
        _wait(stop, wake, began + trigger_seconds)
    return batches


def _wait(stop: threading.Event, wake: threading.Event | None, until: float) -> None:
    """Until ``until`` (monotonic), or sooner: when ``stop`` or ``wake`` is set."""
    if wake is None:
        stop.wait(max(0.0, until - time.monotonic()))
        return
    while not (stop.is_set() or wake.is_set()) and (left := until - time.monotonic()) > 0:
        wake.wait(min(left, 0.2))  # in slices: a stop is seen within 0.2 s
