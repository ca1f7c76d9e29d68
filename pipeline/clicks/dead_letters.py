"""Dead letters off the batch's critical path: written from what the tasks carried back, in the background.

A dead-letter commit after the click commit would cost a second read of the batch from
Kafka, a second parse and a commit on every batch's critical path. So the tasks carry
the bad records back (``batch_stats``), and the dead letters of the batches of the last
``pipeline.dead_letter_seconds`` are committed together in a thread of its own while the next
batches plan and write. The click commit's ``lakehouse.dead-letters-done`` marker names the start of
the oldest batch whose dead letters are not committed yet, so a crash at any point leaves a
catch-up of those batches, read again from Kafka on recovery.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from pipeline.clicks.batch_stats import CARRY_BYTES, BadRecords, BatchStats
from pipeline.kafka_source.offsets import Offsets
from pipeline.kafka_source.ranges import OffsetRange

TIMESTAMP = pa.timestamp("us", tz="UTC")


def carried_table(bad: BadRecords) -> pa.Table:
    """The dead letters the tasks carried back, as parsed records (the columns ``dead_letter_rows`` reads)."""
    keys, values = sorted(bad), [bad[k] for k in sorted(bad)]
    return pa.table({
        "topic": pa.array([k[0] for k in keys], pa.string()),
        "partition": pa.array([k[1] for k in keys], pa.int32()),
        "offset": pa.array([k[2] for k in keys], pa.int64()),
        "value": pa.array([v[0] for v in values], pa.binary()),
        "error": pa.array([v[1] for v in values], pa.string()),
        "timestamp_ms": pa.array([v[2] for v in values], pa.int64()),
    })


def dead_letter_rows(parsed: pa.Table, committed: Offsets, now: dt.datetime) -> pa.Table:
    """The invalid records of ``parsed`` as dead-letter rows, but for those at positions the table already holds."""
    bad = parsed.filter(pc.is_valid(parsed["error"]))
    keep = [offset >= committed.get(topic, {}).get(part, 0) for topic, part, offset in
            zip(*(bad[c].to_pylist() for c in ("topic", "partition", "offset")), strict=True)]
    bad = bad.filter(pa.array(keep, pa.bool_()))
    errors = bad["error"]
    return pa.table({
        "raw": bad["value"],
        "error_kind": pa.array([e.split(":")[0] for e in errors.to_pylist()], pa.string()),
        "error": errors,
        "kafka_topic": bad["topic"],
        "kafka_partition": bad["partition"],
        "kafka_offset": bad["offset"],
        "produced_at": pc.multiply(bad["timestamp_ms"], 1000).cast(pa.int64()).cast(TIMESTAMP),
        "ingest_time": pa.array([now] * bad.num_rows, TIMESTAMP),
    })


@dataclass
class Owed:
    """One committed batch's dead letters, not yet in the dead-letter table."""

    work: list[OffsetRange]  # the batch's ranges: read again when its tasks could not carry every bad record back
    stats: BatchStats  # what its tasks carried back (``bad``, or ``overflow``)
    end: Offsets  # the batch's end offsets: the dead-letter table's position once they are in
    topic_ids: dict[str, str]
    now: dt.datetime  # the batch's ingest time


class DeadLetterQueue:
    """The dead letters of the batches since the last dead-letter commit, committed together every ``seconds``.

    A commit costs the driver about what a batch's click commit does, so committing after every batch
    would double the driver's commits at a short trigger. The batches' dead letters wait in memory
    (bounded by ``CARRY_BYTES``) and go in one commit once the oldest has waited ``seconds``, in a
    thread of its own, one commit at a time and in batch order. ``owed_from`` is the start of the oldest
    batch whose dead letters are not in the table yet: what the click commits record as done, and where
    a recovery reads the topics again. A failed commit is raised to the caller's next ``settle``.
    """

    def __init__(self, name: str, seconds: float, write: Callable[[list[Owed]], None]):
        self._pool = ThreadPoolExecutor(1, thread_name_prefix=name)
        self._seconds, self._write = seconds, write
        self._owed: list[Owed] = []
        self._owed_from: Offsets = {}  # the oldest owed batch's start, while any is owed
        self._owed_since = 0.0
        self._in_flight: tuple[Future, Offsets, dict[str, str]] | None = None  # the commit, from, topic ids

    @property
    def owed_from(self) -> Offsets | None:
        """The start offsets of the oldest batch whose dead letters are not committed (in flight or waiting)."""
        if self._in_flight:
            return self._in_flight[1]
        return self._owed_from if self._owed else None

    @property
    def in_flight_from(self) -> Offsets | None:
        """The start offsets of the oldest batch in the commit that has not been settled yet, if any."""
        return self._in_flight[1] if self._in_flight else None

    def finish_other_logs(self, topic_ids: dict[str, str]) -> None:
        """Commit and wait for the dead letters owed from another log of the topics (one was deleted and created
        again): ``owed_from`` names offsets in one log only, so a click commit in the new log must not claim
        done from an offset in the old one (a recovery would read the new log from there). Rare: a wait is fine."""
        logs = [x.topic_ids for x in self._owed] + ([self._in_flight[2]] if self._in_flight else [])
        if any(ids != topic_ids for ids in logs):
            self.flush()
            self.settle(wait=True)

    def add(self, owed: Owed, batch_start: Offsets) -> None:
        """Owe ``owed``; commit what is owed if it is due (one topic log per commit: a recreated topic waits)."""
        if self._owed and self._owed[-1].topic_ids != owed.topic_ids:
            self.flush()
        if not self._owed:
            self._owed_from, self._owed_since = batch_start, time.monotonic()
        self._owed.append(owed)
        self.flush_if_due()

    def flush_if_due(self) -> None:
        """Commit what is owed once the oldest has waited ``seconds`` or it holds ``CARRY_BYTES``."""
        if self._owed and (time.monotonic() - self._owed_since >= self._seconds
                           or sum(x.stats.bad_bytes for x in self._owed) >= CARRY_BYTES):
            self.flush()

    def flush(self) -> None:
        """Commit what is owed now, after the commit in flight (settled first: its failure is raised here)."""
        self.settle(wait=True)
        if self._owed:
            owed, self._owed = self._owed, []
            self._in_flight = (self._pool.submit(self._write, owed), self._owed_from, owed[-1].topic_ids)

    def drop(self) -> None:
        """Forget what is owed: a recovery reads it again from the topics (from the table's recorded position)."""
        self._owed = []

    def settle(self, wait: bool) -> None:
        """Forget a finished commit, raising its error; with ``wait``, finish the one in flight first.

        A failed commit drops what is owed too: a later commit of the batches after it would move the
        dead-letter table's offsets past the failed ones, and the catch-up (from the position the click
        table recorded) would then skip them. The catch-up writes them all instead.
        """
        if self._in_flight is None or (not wait and not self._in_flight[0].done()):
            return
        future = self._in_flight[0]
        self._in_flight = None
        try:
            future.result()
        except BaseException:
            self.drop()
            raise

    def close(self) -> None:
        """Commit what is owed and wait for it."""
        try:
            self.flush()
            self.settle(wait=True)
        finally:
            self._pool.shutdown(wait=True)
