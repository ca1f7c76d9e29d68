"""Dead letters off the batch's critical path: written from what the parse tasks carried back, in the background.

A dead-letter commit after the click commit would cost a second read of the batch from
Kafka, a second parse and a commit on every batch's critical path. So the parse tasks carry
the bad records back (``batch_stats``), and the commit runs in a thread of its own while the
next batch plans and writes. The click commit's ``lakehouse.dead-letters-done`` marker names the start of
the oldest batch whose dead letters may still be in flight, so a crash at any point
leaves a catch-up of at most two batches, read again from Kafka on recovery.
"""

from __future__ import annotations

import datetime as dt
from concurrent.futures import Future, ThreadPoolExecutor

from pyspark.sql import DataFrame, SparkSession

from pipeline.clicks.batch_stats import BadRecords
from pipeline.kafka_source.offsets import Offsets

DEAD_LETTER_DDL = ("raw BINARY, error_kind STRING, error STRING, kafka_topic STRING, kafka_partition INT, "
                   "kafka_offset BIGINT, produced_at TIMESTAMP, ingest_time TIMESTAMP")


def carried_frame(spark: SparkSession, bad: BadRecords, committed: Offsets, now: dt.datetime) -> DataFrame:
    """The carried dead letters as dead-letter rows, without those at positions the table already holds.

    One slice, so one file per commit: split over the default parallelism, a batch's handful of
    rows made two or three files, and the dead-letter table had three times the click table's
    small files to compact (188 after two minutes of the CI soak, a 51 s compaction the click
    table's waited behind).
    """
    utc = dt.timezone.utc
    rows = [(raw, error.split(":")[0], error, topic, part, offset, dt.datetime.fromtimestamp(ts / 1000, utc), now)
            for (topic, part, offset), (raw, error, ts) in sorted(bad.items())
            if offset >= committed.get(topic, {}).get(part, 0)]
    return spark.createDataFrame(rows, DEAD_LETTER_DDL).coalesce(1)


class BackgroundCommits:
    """One commit at a time in a thread of its own; a failure is raised to the caller's next ``settle``."""

    def __init__(self, spark: SparkSession, name: str):
        self.spark = spark
        self._pool = ThreadPoolExecutor(1, thread_name_prefix=name)
        self._pending: tuple[Future, Offsets] | None = None

    @property
    def in_flight_from(self) -> Offsets | None:
        """The start offsets of the batch whose commit has not been settled yet, if any."""
        return self._pending[1] if self._pending else None

    def submit(self, write, batch_start: Offsets) -> None:
        """Run ``write()`` after the previous write (settled first: its failure is raised here)."""
        self.settle(wait=True)
        pool = self.spark.sparkContext.getLocalProperty("spark.scheduler.pool")

        def run():
            if pool is not None:  # the caller's FAIR pool, so the write is scheduled like the batch
                self.spark.sparkContext.setLocalProperty("spark.scheduler.pool", pool)
            write()

        self._pending = (self._pool.submit(run), batch_start)

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
