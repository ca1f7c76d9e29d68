"""The click ingestion job: one micro-batch = plan, fetch+validate, enrich, commit.

Two tables are written per batch, each commit carrying the batch's end offsets:
first the dead-letter table, then the click table. The click table's offsets are
where the job resumes. If a crash falls between the two commits, the batch is read
again and the dead-letter write keeps only records past the offsets *it* already
committed — so both tables receive every record exactly once.
"""

from __future__ import annotations

import datetime as dt
import functools
import logging
import time

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from lakehouse.settings import Settings
from pipeline import metrics
from pipeline.clicks.validate import Limits, parse_batch
from pipeline.dimensions import ENRICHED_DDL, DimensionCache, enrich_batch
from pipeline.kafka_source import offsets as kafka_offsets
from pipeline.kafka_source.fetch import records_frame
from pipeline.kafka_source.planner import Planner
from pipeline.kafka_source.ranges import OffsetRange, next_offsets
from pipeline.tables import ensure_clicks_tables, ensure_dimension_tables

log = logging.getLogger(__name__)

PARSED_DDL = (
    "topic STRING, partition INT, offset BIGINT, timestamp_ms BIGINT, key BINARY, value BINARY, error STRING, "
    "event_id STRING, webpageId INT, uid STRING, productId STRING, cookieId STRING, expendTime INT, "
    f"updateTime BIGINT, {ENRICHED_DDL}"
)


def parse_and_enrich(raw: pa.RecordBatch, limits: Limits, dims) -> pa.RecordBatch:
    """The Python task's whole share of a batch: validate, then look up the dimensions (a broadcast)."""
    return enrich_batch(parse_batch(raw, limits), dims.value)


def _beyond(offsets: dict[str, dict[int, int]]):
    """A filter keeping records at or past the given per-partition offsets."""
    cond = F.lit(True)
    for topic, parts in offsets.items():
        for part, offset in parts.items():
            cond = cond & ~((F.col("topic") == topic) & (F.col("partition") == part) & (F.col("offset") < offset))
    return cond


class ClickIngestJob:
    name = "clicks"

    def __init__(self, spark: SparkSession, settings: Settings):
        self.spark, self.settings = spark, settings
        cat, pipe = settings.catalog, settings.pipeline
        ensure_clicks_tables(spark, settings)
        ensure_dimension_tables(spark, settings)
        self.dimensions = DimensionCache(spark, settings)
        self.planner = Planner.from_settings(settings, [settings.kafka.clicks_topic])
        self.limits = Limits(max_bytes=pipe.max_event_bytes, max_age_ms=pipe.max_event_age_days * 86_400_000,
                             max_future_ms=pipe.max_event_future_seconds * 1000)
        self.clicks_table, self.dead_table = cat.clicks_table, cat.dead_letter_table
        self.tables = [self.clicks_table, self.dead_table]
        self.recover()

    def recover(self) -> None:
        """(Re)load where each table stands: the tables are the only checkpoint.

        The dimension snapshot is dropped too, so nothing a failed batch read survives it.
        """
        self.dimensions.invalidate()
        position = kafka_offsets.committed_position(self.spark, self.clicks_table)
        self.committed, self.committed_ids = position.offsets, position.topic_ids
        dead = kafka_offsets.committed_position(self.spark, self.dead_table)
        self.dead_committed, self.dead_committed_ids = dead.offsets, dead.topic_ids
        log.info("clicks resume from %s (dead-letter at %s)", self.committed, self.dead_committed)

    def close(self) -> None:
        self.dimensions.close()
        self.planner.close()

    def _read(self, ranges: list[OffsetRange]) -> DataFrame:
        transform = functools.partial(parse_and_enrich, limits=self.limits, dims=self.dimensions.current())
        return records_frame(self.spark, ranges, self.settings.kafka.bootstrap, PARSED_DDL, transform,
                             fetch_wait_ms=self.settings.kafka.fetch_wait_max_ms)

    def _commit(self, df: DataFrame, table: str, offsets: dict[str, dict[int, int]]) -> float:
        began = time.monotonic()
        writer = df.writeTo(table)
        for key, value in kafka_offsets.write_options(offsets, self.planner.topic_ids).items():
            writer = writer.option(key, value)
        writer.append()
        took = time.monotonic() - began
        metrics.COMMIT_SECONDS.labels(table).observe(took)
        metrics.LAST_COMMIT.labels(table).set(time.time())
        return took

    def _update_lag(self, ranges: list[OffsetRange], marks) -> None:
        for r in ranges:
            metrics.LAG.labels(self.name, r.topic, str(r.partition)).set(marks[(r.topic, r.partition)].high - r.start)
            metrics.COMMITTED_OFFSET.labels(self.name, r.topic, str(r.partition)).set(r.start)
        for topic, part, *_ in self.planner.expired_events:
            metrics.OFFSETS_EXPIRED.labels(topic, str(part)).inc()
        self.planner.expired_events.clear()

    def run_once(self) -> int:
        began = time.monotonic()
        ranges, marks = self.planner.plan(self.committed, self.committed_ids)
        self._update_lag(ranges, marks)
        work = [r for r in ranges if r.size > 0]
        if not work:
            metrics.BATCHES.labels(self.name, "idle").inc()
            return 0
        planned_at = time.monotonic()
        metrics.BATCH_PHASE_SECONDS.labels("plan").observe(planned_at - began)
        target = next_offsets(ranges)
        parsed = self._read(work).persist()
        try:
            # One pass over the fetched records: valid/invalid counts and the age of each valid
            # record at t0 in 100 ms steps (for the latency histogram once the commit time is known).
            t0_ms = int(time.time() * 1000)
            age = F.when(F.col("error").isNull(), F.greatest(F.lit(0), F.floor((F.lit(t0_ms) - F.col("timestamp_ms")) / 100)))
            stats = parsed.groupBy(F.col("error").isNull().alias("valid"), age.alias("age")).count().collect()
            valid_n = sum(r["count"] for r in stats if r.valid)
            dead_n = sum(r["count"] for r in stats if not r.valid)
            read_at = time.monotonic()
            metrics.BATCH_PHASE_SECONDS.labels("read").observe(read_at - planned_at)
            now = dt.datetime.now(dt.timezone.utc)
            if dead_n:
                self._commit(self._dead_letters(parsed, now), self.dead_table, target)
                self.dead_committed, self.dead_committed_ids = target, dict(self.planner.topic_ids)
            self._commit(self._clicks(parsed, now), self.clicks_table, target)
            committed_at_ms = int(time.time() * 1000)
            metrics.BATCH_PHASE_SECONDS.labels("write").observe(time.monotonic() - read_at)
            self.committed, self.committed_ids = target, dict(self.planner.topic_ids)
            self._observe_latency([(r.age, r["count"]) for r in stats if r.valid], committed_at_ms - t0_ms)
        finally:
            parsed.unpersist()
        total = valid_n + dead_n
        metrics.ROWS.labels(self.name, "in").inc(total)
        metrics.ROWS.labels(self.name, "valid").inc(valid_n)
        metrics.ROWS.labels(self.name, "dead_letter").inc(dead_n)
        metrics.BATCH_ROWS.labels(self.name).observe(total)
        metrics.BATCHES.labels(self.name, "committed").inc()
        metrics.BATCH_SECONDS.labels(self.name).observe(time.monotonic() - began)
        for r in ranges:
            metrics.COMMITTED_OFFSET.labels(self.name, r.topic, str(r.partition)).set(r.end)
            metrics.LAG.labels(self.name, r.topic, str(r.partition)).set(marks[(r.topic, r.partition)].high - r.end)
        log.info("clicks: committed %d valid + %d dead-lettered in %.2fs", valid_n, dead_n, time.monotonic() - began)
        return max(total, 1)

    def _dead_letters(self, parsed: DataFrame, now: dt.datetime) -> DataFrame:
        # Dead letters committed in an earlier life of a topic say nothing about offsets in its new log.
        same_log = kafka_offsets.in_current_log(self.dead_committed, self.dead_committed_ids, self.planner.topic_ids)
        return (parsed.filter(F.col("error").isNotNull() & _beyond(same_log))
                .select(F.col("value").alias("raw"),
                        F.split(F.col("error"), ":").getItem(0).alias("error_kind"),
                        F.col("error"),
                        F.col("topic").alias("kafka_topic"),
                        F.col("partition").alias("kafka_partition"),
                        F.col("offset").alias("kafka_offset"),
                        F.timestamp_millis("timestamp_ms").alias("produced_at"),
                        F.lit(now).cast("timestamp").alias("ingest_time")))

    def _clicks(self, parsed: DataFrame, now: dt.datetime) -> DataFrame:
        return parsed.filter(F.col("error").isNull()).select(
            *["event_id", "webpageId", "uid", "productId", "cookieId", "expendTime", "updateTime",
              "name", "product_price", "member_level"],
            F.timestamp_millis("updateTime").alias("event_time"),
            F.timestamp_millis("timestamp_ms").alias("produced_at"),
            F.lit(now).cast("timestamp").alias("ingest_time"),
            F.col("topic").alias("kafka_topic"),
            F.col("partition").alias("kafka_partition"),
            F.col("offset").alias("kafka_offset"),
        )

    def _observe_latency(self, ages: list[tuple[int, int]], commit_delay_ms: int) -> None:
        """Latency of each row = its age at t0 (100 ms steps, mid-step) + time from t0 to the commit."""
        bounds = metrics.LATENCY_BUCKETS
        counts = [0] * (len(bounds) + 1)
        total = 0.0
        for age, n in ages:
            latency = (commit_delay_ms + age * 100 + 50) / 1000.0
            counts[next((i for i, b in enumerate(bounds) if latency <= b), len(bounds))] += n
            total += latency * n
        if any(counts):
            metrics.E2E_LATENCY.add(self.clicks_table, counts, total)
