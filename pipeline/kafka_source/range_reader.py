"""The executors' read: planned offset ranges read exactly from Kafka into Arrow, with one consumer kept.

A range is read exactly, from ``start`` up to but not including ``end`` (never "until the
partition looks idle"), so a retried task, or a batch read again after a crash, holds the same
records. ``RangeReader`` keeps one consumer assigned to the partitions it read last: when the
next read starts where the last one ended (a standing task's next batch, ``pipeline.standing_tasks``)
the consumer just goes on, and what it fetched past a range's end is kept for that read; any
other start (a recovery, a new log, a seek, another partition) assigns the partitions afresh.
A task that runs once (the CDC apply's, ``stream.PartitionReader``) makes one for its partition
and closes it after.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence

import numpy as np
import pyarrow as pa
from confluent_kafka import KafkaError, TopicPartition

from lakehouse import kafka_clients
from lakehouse.errors import TransientError
from pipeline.kafka_source.ranges import OffsetRange

RAW_SCHEMA = pa.schema([
    ("topic", pa.string()),
    ("partition", pa.int32()),
    ("offset", pa.int64()),
    ("timestamp_ms", pa.int64()),
    ("key", pa.binary()),
    ("value", pa.binary()),
])

#: records asked of the consumer in one call
CONSUME_BATCH = 10_000


class RangeReadError(TransientError):
    """A planned range could not be read completely within the time limit."""


def records_batch(topic: str, partition: int, msgs: list, keys_and_times: bool = True) -> pa.RecordBatch:
    """Records of one partition as an Arrow batch of ``RAW_SCHEMA``, a column at a time (per record and per column
    it was a sixth of a 10 M-row snapshot's apply, profiled).

    ``keys_and_times=False``: the key and timestamp columns read null, for a reader that needs only the
    values (two calls and a column fewer a record, under the interpreter lock)."""
    n = len(msgs)
    first = msgs[0].offset() if n else 0
    offsets = (np.arange(first, first + n, dtype=np.int64) if n and msgs[-1].offset() == first + n - 1
               else [m.offset() for m in msgs])  # a gapless run (no transaction markers): no call a record
    times, keys = ((pa.array([m.timestamp()[1] for m in msgs], pa.int64()), pa.array([m.key() for m in msgs], pa.binary()))
                   if keys_and_times else (pa.nulls(n, pa.int64()), pa.nulls(n, pa.binary())))
    return pa.RecordBatch.from_arrays([
        pa.repeat(pa.scalar(topic, pa.string()), n), pa.array(np.full(n, partition, dtype=np.int32)),
        pa.array(offsets, pa.int64()), times, keys, pa.array([m.value() for m in msgs], pa.binary())],
        schema=RAW_SCHEMA)


class RangeReader:
    """One assign-only consumer reading exact ranges, batch after batch (module docstring)."""

    def __init__(self, bootstrap: str, fetch_wait_ms: int = 100, timeout_s: float = 60.0, purpose: str = "reader"):
        # fetch_wait_ms: see kafka.fetch_wait_max_ms; purpose names the consumer in the broker's logs
        self._consumer = kafka_clients.reader(bootstrap, purpose, {"fetch.wait.max.ms": fetch_wait_ms})
        self.timeout_s = timeout_s
        #: (topic, partition) -> the next offset this reader hands out; records already fetched past it wait in
        #: ``_early`` (records at or past a range's end, kept for the batch that starts there)
        self._next: dict[tuple[str, int], int] = {}
        self._early: dict[tuple[str, int], list] = {}
        #: (topic, partition) -> the offset at which the consumer last reported reaching the partition's end.
        #: librdkafka reports an end once: one seen during an earlier batch still completes a later range
        #: whose last offsets are not data (transaction markers)
        self._eof: dict[tuple[str, int], int] = {}

    def close(self) -> None:
        self._consumer.close()

    def reset(self) -> None:
        """Forget where the consumer stands: the next read assigns every partition afresh (after a failure)."""
        self._next, self._early, self._eof = {}, {}, {}

    def read(self, ranges: Sequence[OffsetRange]) -> pa.RecordBatch:
        """The records at every range's offsets [start, end), as one Arrow batch of ``RAW_SCHEMA``."""
        parts = list(self.batches(ranges))
        return pa.concat_batches(parts) if parts else pa.RecordBatch.from_pylist([], schema=RAW_SCHEMA)

    def batches(self, ranges: Sequence[OffsetRange], rows: int | None = None) -> Iterator[pa.RecordBatch]:
        """The records at every range's offsets [start, end), as Arrow batches of ``RAW_SCHEMA``: each of one
        range (one topic and partition), none empty, at most ``rows`` records each when given. The ranges are
        read together, so each range's partition must be distinct."""
        if rows is not None and rows < 1:
            raise ValueError(f"rows must be at least 1, not {rows}")
        if len({(r.topic, r.partition) for r in ranges}) < len(ranges):
            raise ValueError("ranges read together must be of distinct partitions: "
                             + ", ".join(f"{r.topic}[{r.partition}] {r.start}-{r.end}" for r in ranges))
        self._position(ranges)
        done = False
        try:
            yield from self._read(ranges, rows)
            done = True
        finally:
            if not done:  # left part-way (an error, or the caller stopped): where the consumer stands is unknown
                self.reset()

    def _read(self, ranges: Sequence[OffsetRange], rows: int | None) -> Iterator[pa.RecordBatch]:
        ends = {(r.topic, r.partition): r.end for r in ranges}
        held: dict[tuple[str, int], list] = {tp: [] for tp in ends}
        for tp, end in ends.items():
            for msg in self._early.pop(tp, []):
                self._place(held[tp], msg, end)
            if self._eof.get(tp, -1) >= end:
                self._next[tp] = max(self._next[tp], end)
        waiting = {tp for tp, end in ends.items() if self._next[tp] < end}
        last_progress = time.monotonic()
        while waiting:
            # librdkafka waits for the whole count or the timeout: ask for what is missing (more only if
            # markers sit among the records; then the timeout, short, ends the wait)
            missing = sum(ends[tp] - self._next[tp] for tp in waiting)
            for msg in self._consumer.consume(num_messages=max(1, min(missing, CONSUME_BATCH)), timeout=0.1):
                tp = (str(msg.topic()), int(msg.partition() or 0))
                err = msg.error()
                if err is not None:
                    if self._stale(tp, err.code(), msg.offset()):
                        continue
                    if err.code() != KafkaError._PARTITION_EOF:
                        raise RangeReadError(f"{tp[0]}[{tp[1]}] at {self._next.get(tp)}: {err}")
                    self._eof[tp] = msg.offset() or 0
                    if tp in ends and self._eof[tp] >= ends[tp]:  # only non-data records (txn markers) remain
                        self._next[tp] = max(self._next[tp], ends[tp])
                elif tp in ends:
                    self._place(held[tp], msg, ends[tp])
                    last_progress = time.monotonic()
            if rows is not None:
                for tp, msgs in held.items():
                    yield from _full_batches(tp, msgs, rows)
            waiting = {tp for tp in waiting if self._next[tp] < ends[tp]}
            if waiting and time.monotonic() - last_progress > self.timeout_s:
                tp = min(waiting)
                raise RangeReadError(f"{tp[0]}[{tp[1]}]: planned to read up to {ends[tp]} but reached only "
                                     f"{self._next[tp]} in {self.timeout_s:.0f}s; the broker may be down or have "
                                     "lost records")
        for tp, msgs in held.items():
            yield from _full_batches(tp, msgs, rows)
            if msgs:
                yield records_batch(tp[0], tp[1], msgs)

    def _stale(self, tp: tuple[str, int], code: int, offset: int | None) -> bool:
        """Whether an offset-out-of-range error is about a position the reader has left: the consumer's prefetch at
        the end of an earlier range can fail after the topic was deleted and created again (its new log is shorter),
        and the error is delivered after the reader assigned the partition afresh at the new range's start."""
        return (code == KafkaError._AUTO_OFFSET_RESET and tp in self._next and offset is not None and offset >= 0
                and offset != self._next[tp])

    def _place(self, held: list, msg, end: int) -> None:
        """A record of this read (before ``end``) into ``held``; a later one kept for the next read.

        A record at or past ``end`` also says the range is complete: whatever lies between is
        not data (transaction markers), so the next batch starts at ``end``.
        """
        tp = (msg.topic(), msg.partition())
        offset = msg.offset()
        if offset < self._next[tp]:  # before the range, or handed out already: never twice
            return
        if offset < end:
            held.append(msg)
            self._next[tp] = offset + 1
        else:
            self._early.setdefault(tp, []).append(msg)
            self._next[tp] = max(self._next[tp], end)

    def _position(self, ranges: Sequence[OffsetRange]) -> None:
        """Assign every partition afresh at its range's start, unless each already stands there."""
        wanted = {(r.topic, r.partition): r.start for r in ranges}
        if wanted == self._next:
            return
        self._consumer.assign([TopicPartition(t, p, start) for (t, p), start in sorted(wanted.items())])
        self._next, self._early, self._eof = dict(wanted), {}, {}


def _full_batches(tp: tuple[str, int], msgs: list, rows: int | None) -> Iterator[pa.RecordBatch]:
    """Batches of exactly ``rows`` records taken off the front of ``msgs`` while it holds that many."""
    while rows is not None and len(msgs) >= rows:
        yield records_batch(tp[0], tp[1], msgs[:rows])
        del msgs[:rows]
