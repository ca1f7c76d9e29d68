"""The click job's merge of the small files its own batches write, so the day-partition stays small.

Every batch adds a data file per standing task: two a second at a one-second trigger, eight
at a quarter-second one. Maintenance's scheduled compaction (a Spark procedure at the lowest
priority, minutes a pass on a busy machine) merges them in a cycle, so the files a reader
opens rise and fall with it; at the shorter triggers it falls behind. So the job merges its
own files as it goes, in two levels:

- every ``merge_seconds`` (or once ``4 x merge_fan_in`` wait) the files one standing task's
  batches added to a partition since the last merge become one file (a lone file is promoted as
  it is);
- once ``merge_fan_in`` of those are waiting, or ``MERGE_BYTES`` of them, they become one
  file, which is left to maintenance's size tiers from then on.

A day-partition then holds at most ``merge_seconds`` of batch files (``4 x merge_fan_in`` a
task at most), ``merge_fan_in`` first-level files and what maintenance has not yet merged; maintenance
leaves the files the
job still owns alone (``PipelineSettings.merge_horizon_seconds``: files whose rows all came
in more recently than that).

A first-level merge is written by the standing task that wrote its batch files: the task
keeps the rows of the files it writes (``pipeline.clicks.task``) and writes them again as one
file when the driver names them with its next work, so nothing is read back and no Spark job
waits for a slot. A second-level merge reads its inputs back in a small Spark job in a
background thread. The driver commits the result as a ``replace`` snapshot: no row
added or removed, so the live aggregates and any incremental reader skip it. The commit is
made right after a batch's commit, under the lock the batches commit under, so it fits in
the gap before the next batch's commit. A merge that fails or loses a race loses nothing:
its inputs stay in the table (maintenance merges them later) and its output, never
committed, is an orphan that maintenance's orphan removal deletes.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pyiceberg.exceptions import CommitFailedException, ValidationException
from pyiceberg.io import load_file_io

from pipeline import metrics
from pipeline.lake_writer.pyiceberg_internals import data_files_of
from pipeline.lake_writer.row_delta import RowDelta
from pipeline.tables import CLICKS_WRITE_ORDER

log = logging.getLogger(__name__)

#: the snapshot property that names a merge's snapshot (which levels it merged)
MERGE_PROPERTY = "lakehouse.merged-levels"

#: compressed bytes of first-level files one merge reads at most: a task holds their rows in memory at once, and
#: a first-level file this large is left to maintenance as it is
MERGE_BYTES = 8 * 1024 * 1024


@dataclass(frozen=True)
class MergeGroup:
    """Files of one partition and one level, to become one file of the next level."""

    level: int
    partition: tuple  # (partition spec id, partition values)
    files: tuple  # pyiceberg DataFile
    task: int | None = None  # the standing task that wrote the files and keeps their rows (first-level merges)


@dataclass
class _Waiting:
    files: list = field(default_factory=list)
    since: float = 0.0  # time.monotonic() the oldest of them was added

    def add(self, files: list, now: float) -> None:
        if not self.files:
            self.since = now
        self.files.extend(files)


def _bytes(files: list) -> int:
    return sum(f.file_size_in_bytes for f in files)


class PendingFiles:
    """Which of the job's files wait for a merge, per partition and level; what is due now.

    Batch files wait per standing task and partition: the task that wrote them keeps their rows
    and writes them again as one file (the first level). First-level files wait per partition for
    the fan-in. A file of ``MERGE_BYTES`` or more is never pending (a merge holds its inputs'
    rows in memory), and a first-level file that waited past the horizon (a partition that went
    quiet: yesterday's, after midnight) is dropped, since maintenance may take it from then on.
    """

    def __init__(self, merge_seconds: float, fan_in: int):
        self.merge_seconds, self.fan_in = merge_seconds, fan_in
        self.horizon = merge_seconds * (fan_in + 2)  # PipelineSettings.merge_horizon_seconds
        self._batch_files: dict[tuple[int, tuple], _Waiting] = {}  # (task, partition) -> batch files
        self._merged: dict[tuple, _Waiting] = {}  # partition -> first-level files

    def add_batch_files(self, files: list, now: float, task: int = 0) -> None:
        """Files standing task ``task`` wrote for a committed batch."""
        for file in files:
            if file.file_size_in_bytes < MERGE_BYTES:
                self._batch_files.setdefault((task, _partition_of(file)), _Waiting()).add([file], now)

    def add_merged(self, group: MergeGroup, files: list, now: float) -> None:
        """A finished merge's output: first-level files wait for the fan-in; second-level ones leave the job."""
        if group.level == 0:
            self._wait_for_fan_in(group.partition, [f for f in files if f.file_size_in_bytes < MERGE_BYTES], now)

    def _wait_for_fan_in(self, key: tuple, files: list, now: float) -> None:
        if files:
            self._merged.setdefault(key, _Waiting()).add(files, now)

    def take_due(self, now: float) -> list[MergeGroup]:
        """The merges due now, their files no longer pending (one batch file alone is promoted, not rewritten)."""
        due = []
        for waiting in self._merged.values():
            if waiting.files and now - waiting.since >= self.horizon - self.merge_seconds:
                waiting.files = []  # maintenance's from the horizon on: a merge of them could lose the race
        for (task, key), waiting in self._batch_files.items():
            files = waiting.files
            if now - waiting.since >= self.merge_seconds or _bytes(files) >= MERGE_BYTES or \
                    len(files) >= 4 * self.fan_in:
                if len(files) == 1:
                    self._wait_for_fan_in(key, files, now)
                else:
                    due.append(MergeGroup(0, key, tuple(files), task))
                waiting.files = []
        for key, waiting in self._merged.items():
            files = waiting.files
            if len(files) >= self.fan_in or (len(files) > 1 and _bytes(files) >= MERGE_BYTES):
                due.append(MergeGroup(1, key, tuple(files)))
                waiting.files = []
        self._batch_files = {k: w for k, w in self._batch_files.items() if w.files}
        self._merged = {k: w for k, w in self._merged.items() if w.files}
        return due

    def waiting(self) -> int:
        """Files that wait for a merge, over all partitions."""
        return sum(len(w.files) for w in (*self._batch_files.values(), *self._merged.values()))


def _partition_of(data_file) -> tuple:
    values = data_file.partition
    return data_file.spec_id, tuple(values[i] for i in range(len(values)))


def merge_group(metadata, io_properties: dict[str, str], group: MergeGroup) -> list:
    """In a Spark task: read the group's files and write their rows again as one data file (or more, past the
    table's target file size)."""
    io = load_file_io(io_properties, metadata.location)
    tables = []
    for file in group.files:
        with io.new_input(file.file_path).open() as stream:
            tables.append(pq.read_table(stream))
    rows = pa.concat_tables(tables, promote_options="default").sort_by(CLICKS_WRITE_ORDER)
    return list(data_files_of(metadata, rows, io))


class FileMerges:
    """Plans the merges and commits each one's result right after a batch's commit.

    First-level merges are the standing tasks' (``ClickTask`` keeps the rows of the files it
    wrote): ``for_task`` names the ones due for a task's next work, and the files it writes
    come back with its answer. Second-level merges read their inputs back in a small Spark
    job in a background thread. The job calls ``added(files, merged, table)`` after each
    batch's commit, holding nothing; ``commit`` is the job's way to commit a staged change
    under its commit lock (it returns once the change landed or raises). ``forget()`` after a
    recovery drops what is pending and what was sent (those files are maintenance's now); a
    merge in flight still finishes.
    """

    def __init__(self, spark, merge_seconds: float, fan_in: int, commit: Callable[[Callable], None],
                 job_name: str):
        self.spark, self.commit, self.job_name = spark, commit, job_name
        self.enabled = merge_seconds > 0
        self.pending = PendingFiles(merge_seconds, fan_in)
        self._lock = threading.Lock()  # the state below, shared with the background thread
        self._to_tasks: dict[int, list[MergeGroup]] = {}  # first-level merges due, for each task's next work
        self._sent: dict[int, list[MergeGroup]] = {}  # the first-level merges each task's last work carried
        self._spark_due: list[MergeGroup] = []  # second-level merges waiting for the background thread
        self._ready: list[tuple[MergeGroup, list, list]] = []  # (group, inputs, outputs) the tasks wrote
        self._batch_committed = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._generation = 0  # bumped by forget(): a merge started before it adds nothing to the new pending files
        self.merged = 0  # files the job replaced by merges in this life (tests, logs)

    def for_task(self, task: int) -> tuple[tuple[str, ...], ...]:
        """The first-level merges to send with standing task ``task``'s next work: each the paths of files it
        wrote, to write again as one (``ClickTask``). Their answer comes with the work's (``added``)."""
        with self._lock:
            groups = self._to_tasks.pop(task, [])
            self._sent[task] = groups
        return tuple(tuple(f.file_path for f in group.files) for group in groups)

    def added(self, files: dict[int, list], merged: dict[int, list], table) -> None:
        """A batch committed ``files`` (per standing task) to ``table``, and its tasks answered the merges their
        work carried with ``merged`` (per task, one entry per merge sent: the paths written again and the files
        holding their rows, or None): note the files, commit the merges, start the merges that are due."""
        if not self.enabled:
            return
        spec_id = table.metadata.default_spec_id
        with self._lock:
            now = time.monotonic()
            for task, answers in merged.items():
                for group, answer in zip(self._sent.pop(task, []), answers, strict=True):
                    if answer is not None:
                        paths, outputs = answer
                        _give_spec(outputs, spec_id)
                        self._ready.append((group, [f for f in group.files if f.file_path in paths], outputs))
            for task, written in files.items():
                _give_spec(written, spec_id)
                self.pending.add_batch_files(written, now, task)
            for group in self.pending.take_due(now):
                if group.task is not None:
                    self._to_tasks.setdefault(group.task, []).append(group)
                else:
                    self._spark_due.append(group)
            self._batch_committed.set()
            if (self._thread is not None and self._thread.is_alive()) or not (self._spark_due or self._ready):
                return
            due, ready, self._spark_due, self._ready = self._spark_due, self._ready, [], []
            generation = self._generation
        # deferred: pyspark: the merge's Spark job must run in the job's scheduler pool (an InheritableThread)
        from pyspark import InheritableThread
        self._thread = InheritableThread(target=self._merge, args=(due, ready, _slim(table.metadata), table.io,
                                                                    generation),
                                         name=f"{self.job_name}-file-merges", daemon=True)
        self._thread.start()

    def forget(self) -> None:
        with self._lock:
            self.pending = PendingFiles(self.pending.merge_seconds, self.pending.fan_in)
            self._to_tasks, self._sent, self._spark_due, self._ready = {}, {}, [], []
            self._generation += 1

    def close(self, timeout: float = 60.0) -> None:
        self._stop.set()
        self._batch_committed.set()
        if self._thread is not None:
            self.spark.sparkContext.cancelJobGroup(self._group)
            self._thread.join(timeout)

    @property
    def _group(self) -> str:
        return f"{self.job_name}-file-merges"

    def _merge(self, due: list[MergeGroup], ready: list[tuple[MergeGroup, list, list]], metadata, io,
               generation: int) -> None:
        """The background thread: the second-level merges as one Spark job (a task per group), then one commit of
        theirs and the tasks' first-level ones."""
        began = time.monotonic()
        merges = list(ready)
        if due:
            merges.extend(self._run_spark_merges(due, metadata, io))
            if not self._wait_for_a_batch_commit():
                return
        if not merges:
            return
        levels = ",".join(sorted({str(group.level) for group, _, _ in merges}))

        def stage(tx) -> None:
            # a replace that also writes the live files' entries into one manifest (a batch adds one each)
            replace = RowDelta(tx, io, {MERGE_PROPERTY: levels}, rewrite=True, same_rows=True)
            with replace:
                for _, inputs, outputs in merges:
                    for old in inputs:
                        replace.remove(old)
                    for new in outputs:
                        replace.add(new)

        committing = time.monotonic()
        try:
            self.commit(stage)
        except (CommitFailedException, ValidationException) as exc:  # maintenance committed meanwhile
            log.info("%s: a merge of small files lost a race (%s); maintenance merges them instead",
                     self.job_name, exc)
            return
        except Exception as exc:  # noqa: BLE001 - as above; the merged files are orphans maintenance removes
            log.warning("%s: committing a merge of small files failed (%s); maintenance merges them instead",
                        self.job_name, exc)
            return
        with self._lock:
            if generation == self._generation:
                for group, _, outputs in merges:
                    self.pending.add_merged(group, outputs, time.monotonic())
        log.debug("%s: merged %d files in %d groups: %.3f s to commit, %.3f s in all", self.job_name,
                  sum(len(inputs) for _, inputs, _ in merges), len(merges), time.monotonic() - committing,
                  time.monotonic() - began)
        for group, inputs, _ in merges:
            self.merged += len(inputs)
            metrics.FILES_MERGED.labels(self.job_name, str(group.level)).inc(len(inputs))
        metrics.BATCH_PHASE_SECONDS.labels("merge").observe(time.monotonic() - began)

    def _run_spark_merges(self, due: list[MergeGroup], metadata, io) -> list[tuple[MergeGroup, list, list]]:
        """The second-level merges, each a task of one Spark job: (group, inputs, outputs); none if it failed."""
        log.debug("%s: merging %d files in %d groups", self.job_name, sum(len(g.files) for g in due), len(due))
        try:
            sc = self.spark.sparkContext
            sc.setJobGroup(self._group, f"{self.job_name}: merge its small files", interruptOnCancel=True)
            outputs = (sc.parallelize(due, len(due))
                       .map(functools.partial(merge_group, metadata, dict(io.properties))).collect())
        except Exception as exc:  # noqa: BLE001 - the files stay in the table: maintenance merges them
            log.warning("%s: merging %d files failed (%s); maintenance merges them instead", self.job_name,
                        sum(len(g.files) for g in due), exc)
            return []
        for files in outputs:
            _give_spec(files, metadata.default_spec_id)
        return [(group, list(group.files), files) for group, files in zip(due, outputs, strict=True)]

    def _wait_for_a_batch_commit(self) -> bool:
        """Wait until a batch commits (the gap before the next one is the merge's), at most ``merge_seconds`` (an
        idle stream commits nothing); False when the job is closing."""
        self._batch_committed.clear()
        waited = 0.0
        while not self._batch_committed.wait(0.5) and waited < self.pending.merge_seconds:
            waited += 0.5
            if self._stop.is_set():
                return False
        return not self._stop.is_set()


def _give_spec(files: list, spec_id: int) -> None:
    """Name the partition spec a task's files were written with: a ``DataFile`` does not carry it across a pickle,
    and a commit that deletes files finds their manifests by it."""
    for file in files:
        if getattr(file, "_spec_id", None) is None:
            file.spec_id = spec_id


def _slim(metadata: Any) -> Any:
    """The table metadata a task needs to write a data file (schema, spec, properties, location): without the
    snapshot history, which is most of its size at a short trigger."""
    return metadata.model_copy(update={"snapshots": [], "snapshot_log": [], "metadata_log": [], "refs": {},
                                       "current_snapshot_id": None})
