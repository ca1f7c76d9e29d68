"""The click ingestion job: one micro-batch = plan (``kafka_source.batch_job``), then one Spark
job that fetches, validates, enriches and commits the click table; its dead letters, if any, are committed
in the background while the next batch runs (``pipeline.clicks.dead_letters``).

Each commit carries the batch's end offsets. The click table's offsets are where the job
resumes. Its commit also records ``lakehouse.dead-letters-done``: offsets up to which
every dead letter was already in the dead-letter table (the start of this batch, or of
the batch whose dead letters are still in flight). A crash between the commits therefore
leaves at most two batches of dead letters unwritten, and the first batch after
``recover`` reads exactly those again and writes only them; a dead-letter write keeps
only records past the offsets *its* table committed. Both tables receive every record
exactly once, and a batch costs one Spark job.
(Writing the dead letters first would need their count first: a second Spark job over a
cached copy of every batch.)
"""

from __future__ import annotations

import datetime as dt
import functools
import logging
import time

import numpy as np
import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema

from lakehouse.settings import Settings
from pipeline import metrics, table_commits
from pipeline.cdc.dimension_tables import ensure_dimension_tables
from pipeline.clicks import evolving_batch
from pipeline.clicks.batch_stats import BatchStats, BatchStatsParam, count_batch, observe_latency
from pipeline.clicks.dead_letters import BackgroundCommits, carried_frame
from pipeline.clicks.evolution import Shape, is_change_request, shape_of
from pipeline.clicks.validate import RESERVED_NAMES, Limits, parse_batch, parsed_schema
from pipeline.dimensions import ENRICHED_FIELDS, DimensionCache, enrich_batch
from pipeline.kafka_source import offsets as kafka_offsets
from pipeline.kafka_source.batch_job import Batch, KafkaBatchJob
from pipeline.kafka_source.ranges import OffsetRange
from pipeline.kafka_source.stream import KafkaStream
from pipeline.snapshot_properties import latest_properties
from pipeline.tables import CLICKS_FIXED_COLUMNS, CLICKS_FROM_EVENT, DEAD_DONE_PROPERTY, ensure_clicks_tables

log = logging.getLogger(__name__)

#: the batch's ingest time, a column the Python task fills: as a literal in the Spark plan it would make each batch's
#: generated code new, and Spark would compile it again every batch (docs/performance.md)
INGEST_TIME = pa.field("ingest_time", pa.timestamp("us", tz="UTC"))


@functools.lru_cache(maxsize=16)
def spark_schema(shape: Shape):
    """What the Python task hands the JVM: the parsed record (evolved columns included) and its enrichment."""
    return from_arrow_schema(pa.schema([*parsed_schema(shape), *ENRICHED_FIELDS, INGEST_TIME]))


def parse_and_enrich(raw: pa.RecordBatch, limits: Limits, dims, ingest_us: int, stats=None, planned_at_ms: int = 0,
                     shape: Shape | None = None) -> pa.RecordBatch:
    """The Python task's whole share of a batch: validate, look up the dimensions (a broadcast), count, stamp
    each row with the batch's ingest time (``ingest_us``, microseconds since the epoch).

    A field the click table has no column for, under policy evolve, raises SchemaChangeNeeded:
    the Spark job fails before its commit and the driver writes the batch as an evolving batch.
    """
    began = time.perf_counter()
    valid = parse_batch(raw, limits, shape=shape or Shape(policy="ignore"))
    parsed_at = time.perf_counter()
    parsed = enrich_batch(valid, dims.value)
    if stats is not None:
        counted = count_batch(parsed, planned_at_ms)
        counted.task_seconds.update(parse=parsed_at - began, enrich=time.perf_counter() - parsed_at)
        stats.add(counted)
    stamp = pa.array(np.full(parsed.num_rows, ingest_us, dtype=np.int64)).cast(INGEST_TIME.type)
    return parsed.append_column(INGEST_TIME, stamp)


def _add_task_seconds(stats, spent: dict[str, float]) -> None:
    """A task's fetch, transform and hand-over seconds into the batch's stats (``KafkaStream.frame``'s ``timings``)."""
    stats.add(BatchStats(task_seconds=dict(spent)))


def _beyond(offsets: kafka_offsets.Offsets):
    """A filter keeping records at or past the given per-partition offsets."""
    cond = F.lit(True)
    for topic, parts in offsets.items():
        for part, offset in parts.items():
            cond = cond & ~((F.col("topic") == topic) & (F.col("partition") == part) & (F.col("offset") < offset))
    return cond


class ClickIngestJob(KafkaBatchJob):
    name = "clicks"

    def __init__(self, spark: SparkSession, settings: Settings):
        self.spark, self.settings = spark, settings
        cat = settings.catalog
        ensure_clicks_tables(spark, settings)
        ensure_dimension_tables(settings)
        self.dimensions = DimensionCache(spark, settings)
        self.stream = KafkaStream.from_settings(settings, [settings.kafka.clicks_topic])
        self.limits = Limits.of(settings)
        self.clicks_table, self.dead_table = cat.clicks_table, cat.dead_letter_table
        self.tables = [self.clicks_table, self.dead_table]
        self._background = BackgroundCommits(spark, "clicks-dead-letters")
        self.recover()

    def recover(self) -> None:
        """(Re)load where each table stands: the tables are the only checkpoint.

        If a crash came between the last batch's two commits, its dead letters are written
        at the start of the next batch. The dimension snapshot is dropped too, so nothing a
        failed batch read survives it.
        """
        try:
            self._background.settle(wait=True)  # the tables, read next, must not move under us
        except Exception as exc:  # noqa: BLE001 - what it did not write, the catch-up below writes
            log.warning("clicks: the last dead-letter commit failed (%s); writing them again", exc)
        self.dimensions.invalidate()
        found = latest_properties(self.spark, self.clicks_table, kafka_offsets.OFFSETS_PROPERTY,
                                  kafka_offsets.TOPIC_IDS_PROPERTY, DEAD_DONE_PROPERTY)
        start = self.stream.initial_offset(found)
        self.committed, self.committed_ids = start.offsets, start.topic_ids
        dead = kafka_offsets.committed_position(self.spark, self.dead_table)
        self.dead_committed, self.dead_committed_ids = dead.offsets, dead.topic_ids
        self.shape = self._table_shape()
        log.info("clicks resume from %s (dead-letter at %s)", self.committed, self.dead_committed)
        # Commits made before the property existed wrote dead letters first: complete up to the click offsets.
        done = found[DEAD_DONE_PROPERTY]
        # Written by the next batch before anything else: if that fails, the batch fails and comes back here.
        self._dead_letters_done: kafka_offsets.Offsets | None = (
            kafka_offsets.decode(done) if done is not None else self.committed)

    def _table_shape(self) -> Shape:
        """The click table's evolved columns as the table has them now, and the configured policy."""
        fields = [(f.name, f.dataType.simpleString()) for f in self.spark.table(self.clicks_table).schema.fields]
        pipe = self.settings.pipeline
        return shape_of(fields, CLICKS_FIXED_COLUMNS, pipe.schema_policy, pipe.max_evolved_columns, RESERVED_NAMES)

    def _catch_up_dead_letters(self, done: kafka_offsets.Offsets) -> None:
        """Write the dead letters between ``done`` and the click offsets (two batches at most; none normally)."""
        ranges = self.stream.ranges_since(done, kafka_offsets.Position(self.committed, self.committed_ids))
        if not ranges:
            return
        same_log = kafka_offsets.in_current_log(self.committed, self.committed_ids, self.stream.topic_ids)
        # Normal after any restart: the last batch's dead-letter commit cannot be told from "it had none".
        log.info("clicks: reading the last committed batch again (%d records) for dead letters its stop may have "
                 "cut off", sum(r.size for r in ranges))
        dead = self._dead_letters(self._read(ranges, dt.datetime.now(dt.timezone.utc)))
        if not dead.isEmpty():
            self._commit(dead, self.dead_table, same_log)
            ids = self.stream.topic_ids
            self.dead_committed, self.dead_committed_ids = same_log, {t: ids[t] for t in same_log if t in ids}

    def close(self) -> None:
        try:
            self._background.close()
        finally:
            self.dimensions.close()
            self.stream.close()

    def _read(self, ranges: list[OffsetRange], now: dt.datetime, stats=None, planned_at_ms: int = 0) -> DataFrame:
        transform = functools.partial(parse_and_enrich, limits=self.limits, dims=self.dimensions.current(),
                                      ingest_us=round(now.timestamp() * 1_000_000), stats=stats,
                                      planned_at_ms=planned_at_ms, shape=self.shape)
        timings = None if stats is None else functools.partial(_add_task_seconds, stats)
        return self.stream.frame(self.spark, ranges, spark_schema(self.shape), transform, timings)

    def _commit(self, df: DataFrame, table: str, offsets: kafka_offsets.Offsets,
                extra: dict[str, str] | None = None, topic_ids: dict[str, str] | None = None) -> float:
        began = time.monotonic()
        # Each task writes the rows it parsed: Iceberg's default for a partitioned table (hash) adds a
        # shuffle to every batch, 0.8 s of a 30,000-event batch's 2.3 s (docs/performance.md). A batch
        # spans a day or two, so each task still writes one or two files; compaction merges them.
        writer = df.writeTo(table).option("distribution-mode", "none")
        position = kafka_offsets.commit_properties(offsets, topic_ids) if topic_ids else self.stream.commit(offsets)
        options = {f"snapshot-property.{k}": v for k, v in {**position, **(extra or {})}.items()}
        for key, value in options.items():
            writer = writer.option(key, value)
        writer.append()
        table_commits.announce(table)
        took = time.monotonic() - began
        metrics.COMMIT_SECONDS.labels(table).observe(took)
        metrics.LAST_COMMIT.labels(table).set(time.time())
        return took

    def before_plan(self) -> None:
        """Raise a failed background dead-letter commit; after a recovery, write the dead letters it owes."""
        self._settle_dead_letters(wait=False)
        if self._dead_letters_done is not None:
            self._catch_up_dead_letters(self._dead_letters_done)
            self._dead_letters_done = None

    def write(self, batch: Batch) -> int:
        """One Spark job: fetch, validate, enrich and append the click rows with the batch's end offsets."""
        work, target, planned_at = batch.work, batch.end, batch.planned_at
        planned_at_ms = int(time.time() * 1000)
        metrics.BATCH_PHASE_SECONDS.labels("plan").observe(planned_at - batch.began)
        # Every dead letter before this batch's start is committed (recover() or the last batch wrote it),
        # unless an earlier batch's are still in flight: then only up to that batch's start.
        done = self._background.in_flight_from or batch.start
        stats = self.spark.sparkContext.accumulator(BatchStats(), BatchStatsParam())
        now = dt.datetime.now(dt.timezone.utc)
        try:
            self._commit(self._clicks(self._read(work, now, stats, planned_at_ms)), self.clicks_table, target,
                         {DEAD_DONE_PROPERTY: kafka_offsets.encode(done)})
            counted: BatchStats = stats.value
        except Exception as exc:
            if not is_change_request(exc):
                raise
            counted = self._evolve(work, target, done, now, planned_at_ms)
        committed_at_ms = int(time.time() * 1000)
        metrics.BATCH_PHASE_SECONDS.labels("write").observe(time.monotonic() - planned_at)
        if counted.dead:
            topic_ids = dict(self.stream.topic_ids)
            self._settle_dead_letters(wait=True)  # one dead-letter commit at a time, in batch order
            self._background.submit(lambda: self._write_dead_letters(work, target, topic_ids, counted, now),
                                    batch.start)
        observe_latency(self.clicks_table, counted.ages.items(), committed_at_ms - planned_at_ms)
        for phase, seconds in counted.task_seconds.items():
            metrics.TASK_PHASE_SECONDS.labels(self.name, phase).inc(seconds)
        metrics.ROWS.labels(self.name, "valid").inc(counted.valid)
        metrics.ROWS.labels(self.name, "dead_letter").inc(counted.dead)
        log.info("clicks: committed %d valid + %d dead-lettered in %.2fs", counted.valid, counted.dead,
                 time.monotonic() - batch.began)
        return counted.valid + counted.dead

    def _evolve(self, work: list[OffsetRange], target: kafka_offsets.Offsets, done: kafka_offsets.Offsets,
                now: dt.datetime, planned_at_ms: int) -> BatchStats:
        """Write the batch whose fields the table lacks: schema change, rows and offsets in one commit.

        Its dead letters follow as any batch's do (carried in the returned stats, committed in the background).
        """
        log.info("clicks: the batch carries fields the click table has no column for: writing it as an evolving "
                 "batch (schema change, rows and offsets in one commit)")
        properties = {**self.stream.commit(target),
                      DEAD_DONE_PROPERTY: kafka_offsets.encode(done)}
        result = evolving_batch.write(self.settings, work, self.shape, self.limits, self.dimensions.current().value,
                                      properties, now, planned_at_ms)
        self.shape = result.shape
        metrics.LAST_COMMIT.labels(self.clicks_table).set(time.time())
        offsets: dict[str, dict[int, list[int]]] = {}
        for r in work:
            offsets.setdefault(r.topic, {})[r.partition] = [r.start, r.end]
        for change in result.changes:
            metrics.SCHEMA_CHANGES.labels(self.clicks_table, change.action).inc()
            log.warning("clicks: the click table %s evolved: %s (in the commit of offsets %s)", self.clicks_table,
                        change.describe(), offsets)
        return result.stats

    def _settle_dead_letters(self, wait: bool) -> None:
        """Raise the error of a finished background dead-letter commit (its batch is caught up after recovery)."""
        in_flight = self._background.in_flight_from
        try:
            self._background.settle(wait)
        except Exception:
            self._dead_letters_done = in_flight
            raise

    def _write_dead_letters(self, work: list[OffsetRange], target: kafka_offsets.Offsets,
                            topic_ids: dict[str, str], counted: BatchStats, now: dt.datetime) -> None:
        """The background commit of one batch's dead letters: carried back by its tasks, or read again."""
        began = time.monotonic()
        if counted.overflow:
            dead = self._dead_letters(self._read(work, now))
        else:
            same_log = kafka_offsets.in_current_log(self.dead_committed, self.dead_committed_ids, topic_ids)
            dead = carried_frame(self.spark, counted.bad, same_log, now)
        self._commit(dead, self.dead_table, target, topic_ids=topic_ids)
        self.dead_committed, self.dead_committed_ids = target, topic_ids
        metrics.BATCH_PHASE_SECONDS.labels("dead_letters").observe(time.monotonic() - began)

    def _dead_letters(self, parsed: DataFrame) -> DataFrame:
        # Dead letters committed in an earlier life of a topic say nothing about offsets in its new log.
        same_log = kafka_offsets.in_current_log(self.dead_committed, self.dead_committed_ids, self.stream.topic_ids)
        return (parsed.filter(F.col("error").isNotNull() & _beyond(same_log))
                .select(F.col("value").alias("raw"),
                        F.split(F.col("error"), ":").getItem(0).alias("error_kind"),
                        F.col("error"),
                        F.col("topic").alias("kafka_topic"),
                        F.col("partition").alias("kafka_partition"),
                        F.col("offset").alias("kafka_offset"),
                        F.timestamp_millis("timestamp_ms").alias("produced_at"),
                        F.col("ingest_time")))

    def _clicks(self, parsed: DataFrame) -> DataFrame:
        """Click-table rows (``evolving_batch.click_rows`` builds the same in Arrow)."""
        return parsed.filter(F.col("error").isNull()).select(
            *CLICKS_FROM_EVENT,
            F.timestamp_millis("updateTime").alias("event_time"),
            F.timestamp_millis("timestamp_ms").alias("produced_at"),
            F.col("ingest_time"),
            F.col("topic").alias("kafka_topic"),
            F.col("partition").alias("kafka_partition"),
            F.col("offset").alias("kafka_offset"),
            *[name for name, _ in self.shape.columns],
        )
