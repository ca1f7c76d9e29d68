"""A peer of the click job: the same work without Spark, each micro-batch read, validated, enriched and appended on
one Python process (`bench peers --arrow-triggers`).

The Spark job (``pipeline.clicks.job``) pays, every batch, for a Spark job: tasks scheduled,
records handed from the JVM to Python and back, and Iceberg's Spark writer; on two cores
that is most of a small batch's time (docs/peers.md). This job does the same work in the
process that plans: one Kafka consumer kept across batches (``RangeReader``), the parse
and enrichment the Spark tasks run (``evolving_batch.parse``), the rows as Arrow
(``evolving_batch.click_rows``) and one PyIceberg commit carrying the rows and the batch's
end offsets, as the dimension apply job does. The exactly-once rule is unchanged: the click
table's newest offsets are where the job resumes.

Dead letters follow the click commit in the same batch, in a commit of their own to the
dead-letter table (they are rare; the Spark job writes them in the background only because
its batches are slow). The click commit records ``lakehouse.dead-letters-done`` = the
batch's start, so a crash between the two commits leaves one batch of dead letters to
write again after ``recover``, exactly as the Spark job's marker does. A batch whose
fields need new columns changes the schema in the same commit as its rows.
"""

from __future__ import annotations

import datetime as dt
import logging
import time

import pyarrow as pa

from lab.peers.clicks_arrow_tables import ensure_clicks_tables
from lakehouse.catalog import pyiceberg_catalog
from lakehouse.settings import Settings
from pipeline import metrics
from pipeline.cdc.dimension_tables import ensure_dimension_tables
from pipeline.clicks import evolving_batch
from pipeline.clicks.batch_stats import BatchStats, count_batch, observe_latency
from pipeline.clicks.dead_letters import dead_letter_rows
from pipeline.clicks.evolution import ARROW_TYPES, Shape
from pipeline.clicks.validate import RESERVED_NAMES, Limits, parse_batch, parsed_schema
from pipeline.dimensions import DimensionCache
from pipeline.kafka_source import offsets as kafka_offsets
from pipeline.kafka_source.batch_job import Batch, KafkaBatchJob
from pipeline.kafka_source.range_reader import RangeReader
from pipeline.kafka_source.stream import KafkaStream, RangePartition
from pipeline.lake_writer.catalog_tables import commit_attempts, commit_once, newest_summary_with
from pipeline.lake_writer.pyiceberg_internals import CachedTransaction
from pipeline.tables import CLICKS_FIXED_COLUMNS, DEAD_DONE_PROPERTY

log = logging.getLogger(__name__)

class ArrowClickJob(KafkaBatchJob):
    """The click job on one Python process (module docstring); ``spark`` is accepted, unused, as by every job."""

    name = "clicks-arrow"

    def __init__(self, spark, settings: Settings):
        self.settings = settings
        cat = settings.catalog
        self.catalog = pyiceberg_catalog(settings)
        ensure_clicks_tables(settings, self.catalog)
        ensure_dimension_tables(settings)
        self.dimensions = DimensionCache(None, settings)
        self.stream = KafkaStream.from_settings(settings, [settings.kafka.clicks_topic])
        self.reader = RangeReader(settings.kafka.bootstrap, settings.kafka.fetch_wait_max_ms)
        self.limits = Limits.of(settings)
        self.clicks_table, self.dead_table = cat.clicks_table, cat.dead_letter_table
        self.tables = [self.clicks_table, self.dead_table]
        self.recover()

    def recover(self) -> None:
        """(Re)load where both tables stand; the reader and the dimension snapshot start afresh."""
        self.reader.reset()
        self.dimensions.invalidate()
        self.clicks = self.catalog.load_table(self.clicks_table)
        self.dead = self.catalog.load_table(self.dead_table)
        summary = newest_summary_with(self.clicks, kafka_offsets.OFFSETS_PROPERTY)
        position = kafka_offsets.position_of(summary)
        self.committed, self.committed_ids = position.offsets, position.topic_ids
        dead = kafka_offsets.position_of(newest_summary_with(self.dead, kafka_offsets.OFFSETS_PROPERTY))
        self.dead_committed, self.dead_committed_ids = dead.offsets, dead.topic_ids
        self.shape = self._table_shape()
        done = summary.get(DEAD_DONE_PROPERTY)
        self._dead_letters_done: kafka_offsets.Offsets | None = (
            kafka_offsets.decode(done) if done is not None else self.committed)
        log.info("clicks resume from %s (dead-letter at %s)", self.committed, self.dead_committed)

    def _table_shape(self) -> Shape:
        """The click table's evolved columns as the table has them now, and the configured policy."""
        pipe = self.settings.pipeline
        # PyIceberg prints a column's type as the parser names the kind of value ("int", "string", ...)
        columns = tuple((f.name, str(f.field_type)) for f in self.clicks.schema().fields
                        if f.name not in CLICKS_FIXED_COLUMNS and str(f.field_type) in ARROW_TYPES)
        return Shape(columns, pipe.schema_policy, pipe.max_evolved_columns, RESERVED_NAMES)

    def close(self) -> None:
        try:
            self.dimensions.close()
            self.stream.close()
        finally:
            self.reader.close()

    def before_plan(self) -> None:
        """After a recovery: write the dead letters the last committed batch may still owe."""
        if self._dead_letters_done is not None:
            self._catch_up_dead_letters(self._dead_letters_done)
            self._dead_letters_done = None

    def _catch_up_dead_letters(self, done: kafka_offsets.Offsets) -> None:
        ranges = self.stream.ranges_since(done, kafka_offsets.Position(self.committed, self.committed_ids))
        if not ranges:
            return
        same_log = kafka_offsets.in_current_log(self.committed, self.committed_ids, self.stream.topic_ids)
        log.info("clicks: reading the last committed batch again (%d records) for dead letters its stop may have "
                 "cut off", sum(r.size for r in ranges))
        parsed = pa.Table.from_batches([  # none at all if the ranges hold no data records (only markers)
            parse_batch(raw, self.limits, shape=self.shape)
            for raw in self.stream.reader.read(RangePartition(tuple(ranges)))], schema=parsed_schema(self.shape))
        self._write_dead_letters(parsed, same_log, dt.datetime.now(dt.timezone.utc))

    def write(self, batch: Batch) -> int:
        """Read, parse, enrich and append the batch with its end offsets; then its dead letters, if any."""
        planned_at_ms = int(time.time() * 1000)
        metrics.BATCH_PHASE_SECONDS.labels("plan").observe(batch.planned_at - batch.began)
        raw = self.reader.read(batch.ranges)  # every partition, idle ones too: the consumer keeps them all
        parsed_batches, changes, shape = evolving_batch.parse([raw], self.shape, self.limits,
                                                              self.dimensions.current().value)
        parsed = pa.Table.from_batches(parsed_batches)
        counted = BatchStats()
        for part in parsed_batches:
            counted.merge(count_batch(part, planned_at_ms))
        now = dt.datetime.now(dt.timezone.utc)
        properties = {**self.stream.commit(batch.end),
                      DEAD_DONE_PROPERTY: kafka_offsets.encode(batch.start)}
        entry = evolving_batch.history_entry(changes, batch.work, now) if changes else {}
        self._append(evolving_batch.click_rows(parsed, shape, now), properties, batch.end, changes, entry)
        self.shape = shape
        # the click table stands at the batch's end now, whatever happens next: a failed dead-letter commit
        # must not let the next batch (after a recovery that fails too) read and append this one again
        self.committed, self.committed_ids = batch.end, dict(self.stream.topic_ids)
        self._dead_letters_done = batch.start  # owed until the dead letters are committed
        committed_at_ms = int(time.time() * 1000)
        metrics.BATCH_PHASE_SECONDS.labels("write").observe(time.monotonic() - batch.planned_at)
        for change in changes:
            metrics.SCHEMA_CHANGES.labels(self.clicks_table, change.action).inc()
            log.warning("clicks: the click table %s evolved: %s (in the commit of offsets up to %s)",
                        self.clicks_table, change.describe(), batch.end)
        if counted.dead:
            self._write_dead_letters(parsed, batch.end, now)
        self._dead_letters_done = None
        observe_latency(self.clicks_table, counted.ages.items(), committed_at_ms - planned_at_ms)
        metrics.ROWS.labels(self.name, "valid").inc(counted.valid)
        metrics.ROWS.labels(self.name, "dead_letter").inc(counted.dead)
        log.debug("clicks: committed %d valid + %d dead-lettered in %.2fs", counted.valid, counted.dead,
                  time.monotonic() - batch.began)
        return counted.valid + counted.dead

    def _append(self, rows: pa.Table, properties: dict[str, str], end: kafka_offsets.Offsets,
                changes: list, entry: dict) -> None:
        """One commit: the rows, the offsets (and a schema change)."""
        def stage(tx) -> None:
            recorded = evolving_batch.stage_changes(tx, self.clicks, changes, entry)
            tx.append(rows, snapshot_properties={**properties, **recorded})

        self._commit_once(stage, end)

    def _commit_once(self, stage, end: kafka_offsets.Offsets) -> None:
        """One click-table commit of what ``stage`` puts in a transaction (``commit_once``)."""
        began = time.monotonic()
        self.clicks = commit_once(self.catalog, self.clicks, stage, lambda table: kafka_offsets.position_of(
            newest_summary_with(table, kafka_offsets.OFFSETS_PROPERTY)).offsets == end, self.name)
        metrics.COMMIT_SECONDS.labels(self.clicks_table).observe(time.monotonic() - began)
        metrics.LAST_COMMIT.labels(self.clicks_table).set(time.time())

    def _write_dead_letters(self, parsed: pa.Table, target: kafka_offsets.Offsets, now: dt.datetime) -> None:
        """Commit the batch's dead letters (those past the dead-letter table's offsets) with ``target``."""
        topic_ids = dict(self.stream.topic_ids)
        for attempt in commit_attempts():
            with attempt:
                if attempt.retry_state.attempt_number > 1:  # what the failed try may have landed is not written twice
                    self.dead = self.catalog.load_table(self.dead_table)
                    landed = kafka_offsets.position_of(newest_summary_with(self.dead, kafka_offsets.OFFSETS_PROPERTY))
                    self.dead_committed, self.dead_committed_ids = landed.offsets, landed.topic_ids
                same_log = kafka_offsets.in_current_log(self.dead_committed, self.dead_committed_ids, topic_ids)
                rows = dead_letter_rows(parsed, same_log, now)
                if rows.num_rows == 0:
                    return
                with CachedTransaction(self.dead) as tx:
                    tx.append(rows, snapshot_properties=kafka_offsets.commit_properties(target, topic_ids))
        self.dead_committed, self.dead_committed_ids = target, topic_ids
        metrics.LAST_COMMIT.labels(self.dead_table).set(time.time())


def main() -> None:
    """`python -m lab.peers.clicks_arrow`: the peer as a process of its own (``lab.peers.process``)."""
    from lab.peers.process import run_peer  # deferred: a process entry point, not the peer's import

    run_peer(lambda settings: ArrowClickJob(None, settings), lambda settings: settings.pipeline.trigger_seconds)


if __name__ == "__main__":
    main()
