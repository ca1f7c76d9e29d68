"""Planned offset ranges read with one consumer kept from batch to batch: the read of a standing task.

``fetch.read_range`` makes a consumer per range and closes it after: right for a Spark task
that runs once, but a task that serves every batch for the job's life (the click job's
standing tasks, ``pipeline.standing_tasks``) would spend a good part of each interval
connecting, fetching metadata and closing. ``RangeReader`` keeps one consumer assigned to
the partitions it read last. When the next batch starts where the last one ended (the
normal case) the consumer just goes on, and what it had already fetched past a range's end
is kept for the next batch; any other start (a recovery, a new log, a seek) assigns the
partition afresh at that offset. Ranges are still read exactly, [start, end), so a batch
read again after a crash holds the same records.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import pyarrow as pa
from confluent_kafka import KafkaError, TopicPartition

from lakehouse import kafka_clients
from pipeline.kafka_source.fetch import RAW_SCHEMA, RangeReadError
from pipeline.kafka_source.ranges import OffsetRange

#: records asked of the consumer in one call
CONSUME_BATCH = 10_000


class RangeReader:
    """One assign-only consumer reading exact ranges, batch after batch (module docstring)."""

    def __init__(self, bootstrap: str, fetch_wait_ms: int = 100, timeout_s: float = 60.0):
        self._consumer = kafka_clients.reader(bootstrap, "clicks-reader", {"fetch.wait.max.ms": fetch_wait_ms})
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
        self._position(ranges)
        ends = {(r.topic, r.partition): r.end for r in ranges}
        cols: dict[str, list] = {name: [] for name in RAW_SCHEMA.names}
        for tp, end in ends.items():
            early = self._early.pop(tp, [])
            for msg in early:
                self._place(cols, msg, end)
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
                    self._place(cols, msg, ends[tp])
                    last_progress = time.monotonic()
            waiting = {tp for tp in waiting if self._next[tp] < ends[tp]}
            if waiting and time.monotonic() - last_progress > self.timeout_s:
                tp = min(waiting)
                raise RangeReadError(f"{tp[0]}[{tp[1]}]: planned to read up to {ends[tp]} but reached only "
                                     f"{self._next[tp]} in {self.timeout_s:.0f}s; the broker may be down or have "
                                     "lost records")
        return pa.RecordBatch.from_pydict(cols, schema=RAW_SCHEMA)

    def _stale(self, tp: tuple[str, int], code: int, offset: int | None) -> bool:
        """Whether an offset-out-of-range error is about a position the reader has left: the consumer's prefetch at
        the end of an earlier range can fail after the topic was deleted and created again (its new log is shorter),
        and the error is delivered after the reader assigned the partition afresh at the new range's start."""
        return (code == KafkaError._AUTO_OFFSET_RESET and tp in self._next and offset is not None and offset >= 0
                and offset != self._next[tp])

    def _place(self, cols: dict[str, list], msg, end: int) -> None:
        """A record of this batch (before ``end``) into ``cols``; a later one kept for the next batch.

        A record at or past ``end`` also says the range is complete: whatever lies between is
        not data (transaction markers), so the next batch starts at ``end``.
        """
        tp = (msg.topic(), msg.partition())
        offset = msg.offset()
        if offset < self._next[tp]:  # before the range, or handed out already: never twice
            return
        if offset < end:
            cols["topic"].append(tp[0])
            cols["partition"].append(tp[1])
            cols["offset"].append(offset)
            cols["timestamp_ms"].append(msg.timestamp()[1])
            cols["key"].append(msg.key())
            cols["value"].append(msg.value())
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
