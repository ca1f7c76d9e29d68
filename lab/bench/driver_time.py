"""`python -m lab.bench.driver_time`: where the click job's driver spends its time, window by window, in a soak.

The soak (``lab.soak.run``) says how long a batch takes; this says what inside the driver takes it.
For the run only, it wraps the click job's phases (the standing tasks, the batch commit, the dead
letters' commit, a merge's commit) and the parts of PyIceberg's Hive commit (reading the current
metadata file, applying the updates, writing the new file, waiting for the metastore's lock) in
timers, and prints each window's count, mean and total per function and per thread: a batch thread
and the background threads share one interpreter lock, so their sums show what the driver's
Python is busy with.
"""

from __future__ import annotations

import functools
import re
import threading
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import typer
from hive_metastore.ThriftHiveMetastore import Client
from pyiceberg.catalog import MetastoreCatalog
from pyiceberg.catalog.hive import HiveCatalog, _HiveClient

from lab.soak.run import run_soak
from lakehouse.settings import load_settings
from pipeline.clicks.file_merges import FileMerges
from pipeline.clicks.job import ClickIngestJob

#: what is timed: (owner, attribute, label)
TIMED = (
    (ClickIngestJob, "write", "batch"),
    (ClickIngestJob, "_run_tasks", "batch: standing tasks"),
    (ClickIngestJob, "_commit", "batch: commit"),
    (ClickIngestJob, "_settle_dead_letters", "batch: waiting for dead letters"),
    (ClickIngestJob, "_commit_dead_letters", "dead letters: commit"),
    (ClickIngestJob, "_commit_merge", "merge: commit (and the lock)"),
    (FileMerges, "_merge", "merge: whole"),
    (HiveCatalog, "commit_table", "hive commit"),
    (HiveCatalog, "_convert_hive_into_iceberg", "hive commit: read metadata"),
    (MetastoreCatalog, "_update_and_stage_table", "hive commit: apply updates"),
    (MetastoreCatalog, "_write_metadata", "hive commit: write metadata"),
    (HiveCatalog, "_wait_for_lock", "hive commit: wait for the lock"),
    (_HiveClient, "__enter__", "hive commit: metastore connection"),
    (Client, "lock", "hive commit: metastore lock"),
    (Client, "get_table", "hive commit: metastore get_table"),
    (Client, "alter_table_with_environment_context", "hive commit: metastore alter_table"),
    (Client, "unlock", "hive commit: metastore unlock"),
)


@dataclass(frozen=True)
class Line:
    label: str
    thread: str
    calls: int
    seconds: float

    @property
    def mean_ms(self) -> float:
        return 1000 * self.seconds / self.calls


class Timings:
    """Timers around named functions, read as the difference since the last window."""

    def __init__(self) -> None:
        self._sums: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0, 0.0])
        self._last: dict[tuple[str, str], tuple[float, float]] = {}
        self._lock = threading.Lock()
        self._undo: list[tuple[type, str, object]] = []

    def wrap(self, owner: type, name: str, label: str) -> None:
        original = owner.__dict__[name]
        function = original.__func__ if isinstance(original, staticmethod) else original

        @functools.wraps(function)
        def timed(*args, **kwargs):
            began = time.monotonic()
            try:
                return function(*args, **kwargs)
            finally:
                self.add(label, time.monotonic() - began)

        setattr(owner, name, staticmethod(timed) if isinstance(original, staticmethod) else timed)
        self._undo.append((owner, name, original))

    def add(self, label: str, seconds: float) -> None:
        thread = re.sub(r"_\d+$", "", threading.current_thread().name)  # a pool's threads count as one
        with self._lock:
            total = self._sums[(label, thread)]
            total[0] += 1
            total[1] += seconds

    def window(self) -> list[Line]:
        """What was timed since the last window, per function and thread."""
        with self._lock:
            now = {key: (calls, seconds) for key, (calls, seconds) in self._sums.items()}
        lines = []
        for (label, thread), (calls, seconds) in sorted(now.items()):
            calls0, seconds0 = self._last.get((label, thread), (0, 0.0))
            if calls > calls0:
                lines.append(Line(label, thread, int(calls - calls0), seconds - seconds0))
        self._last = now
        return lines

    def restore(self) -> None:
        for owner, name, original in reversed(self._undo):
            setattr(owner, name, original)
        self._undo.clear()


def main(
    rate: float = typer.Option(2000, help="Events per second the soak's producer writes."),
    duration: float = typer.Option(360, help="Seconds of load."),
    trigger: float = typer.Option(0.25, help="The click job's trigger (pipeline.trigger_seconds)."),
    merge_seconds: float = typer.Option(10, help="The click job's own merges (pipeline.merge_seconds; 0: off)."),
    every: float = typer.Option(30, help="Seconds per window, for the soak's samples and these timings."),
    out: Path = typer.Option(Path("results/driver-time"), help="Where the soak writes its samples and plot."),
) -> None:
    """Run a soak with the click job's driver timed, and print per window where its time went."""
    settings = load_settings()
    settings.pipeline.trigger_seconds, settings.pipeline.merge_seconds = trigger, merge_seconds
    timings, stop = Timings(), threading.Event()
    for owner, name, label in TIMED:
        timings.wrap(owner, name, label)

    def report() -> None:
        started = time.monotonic()
        while not stop.wait(every):
            typer.echo(f"--- {time.monotonic() - started:.0f} s")
            for line in timings.window():
                typer.echo(f"  {line.label:34} {line.thread:20} {line.calls:5d} calls, mean {line.mean_ms:7.1f} ms, "
                           f"total {line.seconds:6.2f} s")

    reporter = threading.Thread(target=report, name="driver-time", daemon=True)
    reporter.start()
    try:
        result = run_soak(settings, rate=rate, duration=duration, every=every, out_dir=out)
    finally:
        stop.set()
        timings.restore()
    typer.echo(f"rows {result.rows:,} of {result.produced:,} produced; samples in {out}")


if __name__ == "__main__":
    typer.run(main)
