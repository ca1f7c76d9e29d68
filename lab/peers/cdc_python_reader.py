"""Read exact offset ranges with one consumer, and read on past them while nobody asks.

The Python apply peer's reader (``lab.peers.cdc_python``): one consumer kept from batch to
batch that decodes each batch as it is fetched (``transform``), and may read on past the last
range (``ahead_bytes``). A child process that read ahead while the apply wrote was measured no
faster on two cores and is gone (docs/cdc.md, "A reader process, measured").

Ranges are read exactly, [start, end), as ``pipeline.kafka_source.range_reader`` reads them: a batch read again
after a crash holds the same records. When the next request starts where the last one ended
(the normal case) the records read ahead are handed out first; any other start (a recovery,
a new log) assigns that partition afresh and drops what was read ahead of it. What is read
ahead is bounded (``ahead_bytes``); past that the reader waits to be asked.

``transform`` (the CDC apply's ``parse_changes``) turns each batch into the caller's rows as it
is fetched, so that work, too, is done ahead: it must keep one row per record, in order, with
the record's ``offset``. A batch it fails on is kept as fetched and transformed again when it
is handed out, which raises then, for the request that holds the bad record.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
from confluent_kafka import KafkaError, TopicPartition

from lakehouse import kafka_clients
from pipeline.kafka_source.range_reader import RAW_SCHEMA, RangeReadError, records_batch
from pipeline.kafka_source.ranges import OffsetRange

log = logging.getLogger(__name__)

Partition = tuple[str, int]

#: what librdkafka may hold fetched and not yet taken (its default, 64 MB, cost the reader ~100 MB of memory)
QUEUE_KB = 8 << 10


class AheadReader:
    """One assign-only consumer serving exact ranges, with the records past them kept as Arrow batches.

    ``batch_rows``: records taken from librdkafka at a time, and so the size of a batch (5,000: batches of
    20,000 left the reader process ~65 MB larger for their transient arrays, at no gain in speed).
    """

    def __init__(self, bootstrap: str, fetch_wait_ms: int = 100, ahead_bytes: int = 32 << 20,
                 batch_rows: int = 5_000, timeout_s: float = 60.0, keys_and_times: bool = False,
                 transform: Callable[[pa.RecordBatch], pa.RecordBatch] | None = None):
        self._consumer = kafka_clients.reader(bootstrap, "reader", {
            "fetch.wait.max.ms": fetch_wait_ms,
            # librdkafka's own prefetch, bounded: what it holds is read ahead as well. Once the bound is reached it
            # waits fetch.queue.backoff.ms before fetching again, 1 s by default: that wait, not the work, held a
            # reader with a small queue to ~50,000 records/s (5 ms: ~300,000)
            "queued.max.messages.kbytes": QUEUE_KB,
            "fetch.queue.backoff.ms": 5})
        self.ahead_bytes, self.batch_rows, self.timeout_s = ahead_bytes, batch_rows, timeout_s
        self.keys_and_times, self.transform = keys_and_times, transform
        self._served: dict[Partition, int] = {}  # the offset the next range of each assigned partition starts at
        self._fetched: dict[Partition, int] = {}  # one past the last record the consumer gave, per partition
        self._eof: dict[Partition, int] = {}  # where the consumer last reported the partition's end
        self._ahead: dict[Partition, list[pa.RecordBatch]] = {}
        self._held = 0  # bytes in ``_ahead``

    def close(self) -> None:
        self._consumer.close()

    @property
    def held_bytes(self) -> int:
        return self._held

    def can_read_ahead(self) -> bool:
        return bool(self._served) and self._held < self.ahead_bytes

    def read_ahead(self, timeout: float = 0.05) -> int:
        """One fetch past what was served, kept for the next request; returns the records it added."""
        if not self.can_read_ahead():
            return 0
        try:
            return self._file(self._consumer.consume(num_messages=self.batch_rows, timeout=timeout))
        except RangeReadError as exc:  # the request that needs these records reads them again and says so
            log.warning("reading ahead stopped: %s", exc)
            self.reset()
            return 0

    def read(self, ranges: Sequence[OffsetRange]) -> Iterator[pa.RecordBatch]:
        """The records at each range's offsets [start, end), range after range, as batches of ``RAW_SCHEMA``."""
        ranges = [r for r in ranges if r.end > r.start]
        self._reassign({(r.topic, r.partition): r.start for r in ranges})
        for r in ranges:
            tp = (r.topic, r.partition)
            yield from self._take(tp, r.end)
            last_progress = time.monotonic()
            while not self._complete(tp, r.end):
                missing = max(1, min(self.batch_rows, r.end - self._fetched[tp]))
                if self._file(self._consumer.consume(num_messages=missing, timeout=0.1)):
                    last_progress = time.monotonic()
                yield from self._take(tp, r.end)
                if not self._complete(tp, r.end) and time.monotonic() - last_progress > self.timeout_s:
                    raise RangeReadError(f"{r.topic}[{r.partition}]: planned to read [{r.start}, {r.end}) but reached "
                                         f"only {self._fetched[tp]} in {self.timeout_s:.0f}s; the broker may be down or "
                                         "have lost records")
            self._served[tp] = r.end

    def _complete(self, tp: Partition, end: int) -> bool:
        """Every record before ``end`` was fetched: one at or past it came, or the partition's end did (what lies
        between is then not data: transaction markers)."""
        return self._fetched[tp] >= end or self._eof.get(tp, -1) >= end

    def _take(self, tp: Partition, end: int) -> Iterator[pa.RecordBatch]:
        """The batches read ahead of ``tp`` before ``end``; a batch reaching past it is cut there."""
        kept = self._ahead.get(tp, [])
        while kept:
            batch = kept[0]
            offsets = batch.column("offset").to_numpy()
            cut = int(np.searchsorted(offsets, end))
            if cut == 0:
                return
            if cut < batch.num_rows:
                head, kept[0] = batch.slice(0, cut), batch.slice(cut)
                self._recount()
                yield self._finish(head)
                return
            kept.pop(0)
            self._recount()
            yield self._finish(batch)

    def _finish(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """A batch as handed out: transformed, if that failed when it was fetched (it raises now)."""
        return self.transform(batch) if self.transform and batch.schema.equals(RAW_SCHEMA) else batch

    def _recount(self) -> None:
        self._held = sum(b.nbytes for kept in self._ahead.values() for b in kept)

    def _file(self, msgs: list) -> int:
        """Records from the consumer into each partition's batches read ahead; returns how many data records."""
        added, run = 0, list[Any]()
        for msg in msgs:
            err = msg.error()
            if err is not None:
                if err.code() != KafkaError._PARTITION_EOF:
                    raise RangeReadError(f"{msg.topic()}[{msg.partition()}]: {err}")
                self._eof[(msg.topic(), msg.partition())] = msg.offset() or 0
                continue
            if run and (msg.partition() != run[0].partition() or msg.topic() != run[0].topic()):
                added += self._keep(run)
                run = []
            run.append(msg)
        if run:
            added += self._keep(run)
        return added

    def _keep(self, msgs: list) -> int:
        tp = (msgs[0].topic(), msgs[0].partition())
        if tp not in self._served:  # a partition let go of since it was fetched
            return 0
        if msgs[0].offset() < self._fetched[tp]:  # fetched before the partition was assigned afresh: never twice
            msgs = [m for m in msgs if m.offset() >= self._fetched[tp]]
            if not msgs:
                return 0
        batch = records_batch(tp[0], tp[1], msgs, self.keys_and_times)
        if self.transform is not None:
            try:
                batch = self.transform(batch)
            except Exception:  # noqa: BLE001 - kept as fetched; handed out, it is transformed again and raises
                pass
        self._ahead.setdefault(tp, []).append(batch)
        self._recount()
        self._fetched[tp] = msgs[-1].offset() + 1
        return len(msgs)

    def _reassign(self, wanted: dict[Partition, int]) -> None:
        """Make every wanted partition stand at its start; others assigned keep their place and what they read ahead.

        A partition whose start is where it was served up to goes on; any other is assigned afresh at the
        start, forgetting what was read ahead of it (a recovery re-reads from the committed offsets).
        """
        moved = {tp: start for tp, start in wanted.items() if self._served.get(tp) != start}
        if not moved:
            return
        for tp in moved:
            self._ahead.pop(tp, None)
            self._eof.pop(tp, None)
        self._recount()
        self._served.update(moved)
        self._fetched.update(moved)
        self._consumer.assign([TopicPartition(t, p, self._fetched[(t, p)]) for t, p in sorted(self._served)])

    def reset(self) -> None:
        """Forget every position and what was read ahead (after an error): the next request assigns afresh."""
        self._served, self._fetched, self._eof, self._ahead, self._held = {}, {}, {}, {}, 0
        self._consumer.assign([])
