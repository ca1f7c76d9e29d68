"""One micro-batch of a Kafka-reading job: plan -> write the rows with their offsets -> metrics.

The click ingestion and the dimension apply differ only in what they do with the records
(Spark appends to the click table; upserts on the driver). Everything around that is the
same and lives here once: planning the exactly-once ranges from the offsets the tables
committed, the lag and offset gauges, idle batches, what counts as committed afterwards,
and the batch metrics. A job subclasses ``KafkaBatchJob`` and writes ``write(batch)``:
commit the batch's rows together with ``batch.end`` (``KafkaStream.commit``), return
how many records it consumed, and raise when anything failed. The runner then calls the
job's ``recover()``, which re-reads where the tables stand, so nothing here guesses.
"""

from __future__ import annotations

import functools
import logging
import time
from dataclasses import dataclass

from lakehouse.settings import Settings
from pipeline import metrics
from pipeline.kafka_source.offsets import Position
from pipeline.kafka_source.planner import Watermarks
from pipeline.kafka_source.ranges import OffsetRange, Offsets, next_offsets
from pipeline.kafka_source.stream import KafkaStream

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Batch:
    """What one planning found: a range per partition (empty ones included) and the broker's watermarks."""

    ranges: list[OffsetRange]
    marks: dict[tuple[str, int], Watermarks]
    began: float  # time.monotonic() when the batch began, before planning
    planned_at: float  # time.monotonic() when planning ended

    @functools.cached_property
    def work(self) -> list[OffsetRange]:
        """The ranges holding records: what the batch reads."""
        return [r for r in self.ranges if r.size > 0]

    @functools.cached_property
    def start(self) -> Offsets:
        out: Offsets = {}
        for r in self.ranges:
            out.setdefault(r.topic, {})[r.partition] = r.start
        return out

    @functools.cached_property
    def end(self) -> Offsets:
        """The offsets the batch's commit records: where the next batch starts."""
        return next_offsets(self.ranges)


class KafkaBatchJob:
    """The skeleton of every Kafka-reading job; ``runner.run_loop`` drives ``run_once`` and ``recover``.

    A subclass sets ``name``, ``settings``, ``tables`` and ``stream``, keeps ``committed`` and
    ``committed_ids`` as its tables record them (``recover``), and implements ``write``.
    """

    name: str
    settings: Settings
    tables: list[str]
    stream: KafkaStream
    committed: Offsets
    committed_ids: dict[str, str]

    def write(self, batch: Batch) -> int:
        """Commit the batch's rows with ``batch.end`` as their offsets; return the records consumed."""
        raise NotImplementedError

    def before_plan(self) -> None:
        """Work owed from an earlier batch, done before the next plan (the click job's dead letters)."""

    def recover(self) -> None:
        raise NotImplementedError

    def run_once(self) -> int:
        """One batch; returns the records committed (0: the topics held nothing new, an idle batch)."""
        began = time.monotonic()
        self.before_plan()
        ranges, marks = self.stream.latest_offset(Position(self.committed, self.committed_ids))
        batch = Batch(ranges, marks, began, time.monotonic())
        self._gauge_offsets(batch, batch.start)
        if not batch.work:
            metrics.BATCHES.labels(self.name, "idle").inc()
            return 0
        records = self.write(batch)
        self.committed, self.committed_ids = batch.end, dict(self.stream.topic_ids)
        metrics.ROWS.labels(self.name, "in").inc(records)
        metrics.BATCH_ROWS.labels(self.name).observe(records)
        metrics.BATCHES.labels(self.name, "committed").inc()
        metrics.BATCH_SECONDS.labels(self.name).observe(time.monotonic() - began)
        self._gauge_offsets(batch, batch.end)
        return max(records, 1)

    def _gauge_offsets(self, batch: Batch, position: Offsets) -> None:
        """Committed offset and lag (records on the broker past it) per partition."""
        for r in batch.ranges:
            at = position[r.topic][r.partition]
            metrics.COMMITTED_OFFSET.labels(self.name, r.topic, str(r.partition)).set(at)
            metrics.LAG.labels(self.name, r.topic, str(r.partition)).set(batch.marks[(r.topic, r.partition)].high - at)
