"""Dead letters off the batch's critical path: written from what the tasks carried back, in the background.

A dead-letter commit after the click commit would cost a second read of the batch from
Kafka, a second parse and a commit on every batch's critical path. So the tasks carry
the bad records back (``batch_stats``), and the commit runs in a thread of its own while the
next batch plans and writes. The click commit's ``lakehouse.dead-letters-done`` marker names the start of
the oldest batch whose dead letters may still be in flight, so a crash at any point
leaves a catch-up of at most two batches, read again from Kafka on recovery.
"""

from __future__ import annotations

import datetime as dt
from concurrent.futures import Future, ThreadPoolExecutor

import pyarrow as pa
import pyarrow.compute as pc

from pipeline.clicks.batch_stats import BadRecords
from pipeline.kafka_source.offsets import Offsets

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


class BackgroundCommits:
    """One commit at a time in a thread of its own; a failure is raised to the caller's next ``settle``."""

    def __init__(self, name: str):
        self._pool = ThreadPoolExecutor(1, thread_name_prefix=name)
        self._pending: tuple[Future, Offsets] | None = None

    @property
    def in_flight_from(self) -> Offsets | None:
        """The start offsets of the batch whose commit has not been settled yet, if any."""
        return self._pending[1] if self._pending else None

    def submit(self, write, batch_start: Offsets) -> None:
        """Run ``write()`` after the previous write (settled first: its failure is raised here)."""
        self.settle(wait=True)
        self._pending = (self._pool.submit(write), batch_start)

    def settle(self, wait: bool) -> None:
        """Forget a finished write, raising its error; with ``wait``, finish the one in flight first."""
        if self._pending is None or (not wait and not self._pending[0].done()):
            return
        future, _ = self._pending
        self._pending = None
        future.result()

    def close(self) -> None:
        try:
            self.settle(wait=True)
        finally:
            self._pool.shutdown(wait=True)
