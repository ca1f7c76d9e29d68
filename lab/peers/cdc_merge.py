"""Iceberg's standard Spark path for a Debezium stream, as a CDC peer: each batch ``MERGE INTO`` the dimension table.

What a Spark user would write first, measured beside this pipeline's CDC apply (``pipeline.cdc.apply``).
One micro-batch per planning, with the pipeline's own exactly-once planning
(``kafka_source.batch_job``), per change topic:

1. Spark tasks fetch the topic's planned ranges (``KafkaStream.frame``), decode the Debezium envelopes
   and cut each change's after-image to the table's columns (``change_rows``), as many tasks as cores.
2. Spark keeps each key's last change in binlog order (a window over the key: a partition's range may be
   split over tasks).
3. ``MERGE INTO`` the table, merge-on-read (the rows a change replaces are named in position-delete
   files), with the batch's end offsets in the same snapshot through Iceberg's session-level snapshot
   properties. The table's rows are the key state: the join finds each key's row by reading the table.

That last step is why it is a peer and not the product: the join reads every key of the table each
batch. Seed-size tables are applied in ~2 s (p95); at 10 M rows a batch of ~9,000 changes took 9 s and
the snapshot ran at 38,736 rows/s (docs/performance.md, "MERGE INTO at 10 M rows").

The tables commit side by side, each in its own Spark session (its own snapshot properties). Schema
changes the capture recorded (a column added, a type widened) are committed just before the batch that
needs them (``pipeline.cdc.table_evolution``), and the MERGE's snapshot records them.
"""

from __future__ import annotations

import functools
import json
import logging
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.accumulators import AccumulatorParam
from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema

from lakehouse.catalog import pyiceberg_catalog
from lakehouse.settings import Settings
from pipeline import metrics
from pipeline.capture.schema_history import SchemaRecord, SchemaWatch
from pipeline.cdc.changes import parse_changes
from pipeline.cdc.dimension_tables import ensure_dimension_tables
from pipeline.cdc.images import after_images, image_struct, newest_per_key
from pipeline.cdc.table_evolution import HISTORY_PROPERTY, plan, stage
from pipeline.cdc.targets import Target, targets
from pipeline.kafka_source import offsets as kafka_offsets
from pipeline.kafka_source.batch_job import Batch, KafkaBatchJob
from pipeline.kafka_source.stream import KafkaStream

log = logging.getLogger(__name__)

#: the columns a change row carries beside the table's own
OP, ORDER, SOURCE_TS = "_op", "_order", "_source_ts_ms"
SNAPSHOT_PROPERTY = "spark.sql.iceberg.snapshot-property."


def change_rows(raw: pa.RecordBatch, topic: str, key: str, columns: dict[str, str], schema: pa.Schema) -> pa.RecordBatch:
    """One task's records of one topic -> one row per key (its last change here): the table's columns + op.

    A delete's row holds only its key; an upsert's is its after-image read as the table's ``schema``.
    """
    changes = pa.Table.from_batches([parse_changes(raw, {topic: key}, {topic: image_struct(columns, schema)})])
    newest = newest_per_key(changes)
    deleted = pc.equal(newest.column("op"), "d")
    upserts = newest.filter(pc.invert(deleted))
    images = after_images(newest, columns, schema)
    deletes = newest.filter(deleted)
    key_column = next(name for name, source in columns.items() if source == key)
    gone = pa.table({f.name: (deletes.column("pk").cast(f.type) if f.name == key_column else pa.nulls(deletes.num_rows, f.type))
                     for f in schema}, schema=schema)
    out = pa.concat_tables([images.cast(schema), gone])
    out = out.append_column(OP, pa.concat_arrays([pa.repeat(pa.scalar("u"), upserts.num_rows),
                                                  pa.repeat(pa.scalar("d"), deletes.num_rows)]))
    out = out.append_column(ORDER, pa.concat_arrays([upserts.column("order_key").combine_chunks().cast(pa.string()),
                                                     deletes.column("order_key").combine_chunks().cast(pa.string())]))
    out = out.append_column(SOURCE_TS, pa.concat_arrays([upserts.column("source_ts_ms").combine_chunks(),
                                                         deletes.column("source_ts_ms").combine_chunks()]))
    return out.combine_chunks().to_batches()[0] if out.num_rows else pa.RecordBatch.from_pylist([], out.schema)


def spark_arrow_schema(schema: pa.Schema) -> pa.Schema:
    """A table's Arrow schema (as PyIceberg gives it) as Spark exchanges rows: plain strings, every column nullable."""
    plain = {pa.large_string(): pa.string(), pa.large_binary(): pa.binary()}
    return pa.schema([pa.field(f.name, plain.get(f.type, f.type)) for f in schema])


def _row_schema(schema: pa.Schema) -> pa.Schema:
    return schema.append(pa.field(OP, pa.string())).append(pa.field(ORDER, pa.string())).append(
        pa.field(SOURCE_TS, pa.int64()))


def merge_statement(table: str, key: str, columns: list[str], source: str) -> str:
    """The MERGE of a batch's change rows (view ``source``) into ``table``."""
    quoted = [f"`{c}`" for c in columns]
    return (f"MERGE INTO {table} t USING {source} s ON t.`{key}` = s.`{key}` "
            f"WHEN MATCHED AND s.{OP} = 'd' THEN DELETE "
            f"WHEN MATCHED THEN UPDATE SET {', '.join(f't.{c} = s.{c}' for c in quoted)} "
            f"WHEN NOT MATCHED AND s.{OP} <> 'd' THEN INSERT ({', '.join(quoted)}) "
            f"VALUES ({', '.join(f's.{c}' for c in quoted)})")


#: merge-on-read for Spark's row-level commands, one delete file a task and partition (not one a data file touched)
MERGE_PROPERTIES = {
    "write.delete.mode": "merge-on-read",
    "write.update.mode": "merge-on-read",
    "write.merge.mode": "merge-on-read",
    "write.delete.granularity": "partition",
}


class MergeApplyJob(KafkaBatchJob):
    """The MERGE INTO peer as a job of the pipeline's runner (``run_once``, ``recover``, ``close``)."""

    name = "dims"

    def __init__(self, spark: SparkSession, settings: Settings):
        self.spark, self.settings = spark, settings
        self.catalog = pyiceberg_catalog(settings)
        ensure_dimension_tables(settings, self.catalog)
        self.history = SchemaWatch(settings)
        self.targets: dict[str, Target] = targets(settings, self.history.latest(), self.catalog)
        self.tables = [t.table for t in self.targets.values()]
        for table in self.tables:
            loaded = self.catalog.load_table(table)
            if any(loaded.properties.get(k) != v for k, v in MERGE_PROPERTIES.items()):
                with loaded.transaction() as tx:
                    tx.set_properties(MERGE_PROPERTIES)
        self.stream = KafkaStream.from_settings(settings, list(self.targets), settings.pipeline.cdc_max_records)
        # one session and one catalog connection a table: each session carries its own snapshot properties (the
        # offsets) while the tables commit side by side; a metastore connection serves one thread at a time
        self.sessions = {topic: spark.newSession() for topic in self.targets}
        self.catalogs = {topic: pyiceberg_catalog(settings) for topic in self.targets}
        self._threads = ThreadPoolExecutor(len(self.targets), thread_name_prefix="dims")
        self.recover()

    def recover(self) -> None:
        """Where each topic's changes are applied up to: the offsets its table's newest snapshot holds."""
        self.committed: kafka_offsets.Offsets = {}
        self.committed_ids: dict[str, str] = {}
        for topic, target in self.targets.items():
            position = kafka_offsets.committed_position(self.spark, target.table)
            self.committed.update({t: o for t, o in position.offsets.items() if t == topic})
            self.committed_ids.update({t: i for t, i in position.topic_ids.items() if t == topic})

    def close(self) -> None:
        self._threads.shutdown(wait=True)
        self.stream.close()

    def write(self, batch: Batch) -> int:
        """One MERGE per table with changes, side by side; returns the changes applied."""
        schemas = self.history.latest()  # read before the records: every change read has its schema recorded
        topics = sorted({r.topic for r in batch.work})
        applied = self._threads.map(lambda topic: self._apply(topic, batch, schemas.get(self.targets[topic].source_table)),
                                    topics)
        return sum(applied)

    def _apply(self, topic: str, batch: Batch, source: SchemaRecord | None) -> int:
        target = self.targets[topic]
        session = self.sessions[topic]
        began = time.monotonic()
        catalog = self.catalogs[topic]
        evolved = self._follow(catalog, target, source) if source is not None else {}
        table = catalog.load_table(target.table)
        schema = spark_arrow_schema(table.schema().as_arrow())
        lake_to_source = {lake: src for src, lake in target.renames.items()}
        columns = {f.name: lake_to_source.get(f.name, f.name) for f in schema}
        key_column = target.renames.get(target.key, target.key)
        counted = session.sparkContext.accumulator(Counts(), CountsParam())
        transform = functools.partial(_counted_rows, topic=topic, key=target.key, columns=columns, schema=schema,
                                      counter=counted)
        ranges = [r for r in batch.work if r.topic == topic]
        rows = _ranges_frame(self.stream, session, ranges, from_arrow_schema(_row_schema(schema)), transform)
        newest = _newest(rows, key_column)
        view = f"dims_changes_{target.table.replace('.', '_')}"
        newest.createOrReplaceTempView(view)
        properties = {**self.stream.commit({topic: batch.end[topic]}), **evolved}
        for name, value in properties.items():
            session.conf.set(SNAPSHOT_PROPERTY + name, value)
        try:
            session.sql(merge_statement(target.table, key_column, [f.name for f in schema], view))
        finally:
            for name in properties:
                session.conf.unset(SNAPSHOT_PROPERTY + name)
        took = time.monotonic() - began
        metrics.COMMIT_SECONDS.labels(target.table).observe(took)
        metrics.LAST_COMMIT.labels(target.table).set(time.time())
        counts: Counts = counted.value
        metrics.CDC_APPLIED.labels(target.table, "upsert").inc(counts.changes - counts.deletes)
        metrics.CDC_APPLIED.labels(target.table, "delete").inc(counts.deletes)
        if counts.oldest_ms is not None:
            metrics.DIMENSION_APPLY_LAG.labels(target.table).set(time.time() - counts.oldest_ms / 1000)
        log.info("dims: %d changes into %s in %.2fs", counts.changes, target.table, took)
        return counts.changes

    def _follow(self, catalog, target: Target, source: SchemaRecord) -> dict[str, str]:
        """Commit the columns the capture recorded that the table lacks (added, widened), just before the MERGE;
        returns the snapshot properties that record the change in the MERGE's commit."""
        table = catalog.load_table(target.table)
        changes = plan(table.schema(), source, target.renames)
        if not changes:
            return {}
        history = json.loads(table.properties.get(HISTORY_PROPERTY, "[]"))
        with table.transaction() as tx:
            recorded = stage(tx, changes, source, history)
        for change in changes:
            metrics.SCHEMA_CHANGES.labels(target.table, change.action).inc()
        log.warning("dims: %s follows its source: %s", target.table,
                    ", ".join(f"{c.action} {c.column} {c.type}" for c in changes))
        return recorded


@dataclass(frozen=True)
class Counts:
    """What a batch's tasks read: changes, deletes among them, the oldest change's source time."""

    changes: int = 0
    deletes: int = 0
    oldest_ms: int | None = None

    def __add__(self, other: Counts) -> Counts:
        times = [t for t in (self.oldest_ms, other.oldest_ms) if t is not None]
        return Counts(self.changes + other.changes, self.deletes + other.deletes, min(times) if times else None)


class CountsParam(AccumulatorParam):
    def zero(self, value: Counts) -> Counts:
        return Counts()

    def addInPlace(self, value1: Counts, value2: Counts) -> Counts:
        return value1 + value2


def _ranges_frame(stream: KafkaStream, spark: SparkSession, ranges: list, schema, transform) -> DataFrame:
    """The records at ``ranges``, transformed into ``schema``'s columns, as a DataFrame of one task a partition:
    a Spark job a batch, as Iceberg's standard path runs (``mapInArrow`` over ``spark.range``, each task
    looking its partition up by its row's index)."""
    parts = stream.partitions(ranges, spark.sparkContext.defaultParallelism)
    reader = stream.reader

    def run(indexes):
        for batch in indexes:
            for i in batch.column(0).to_pylist():
                for raw in reader.read(parts[i]):
                    yield transform(raw)

    return spark.range(0, len(parts), 1, numPartitions=max(1, len(parts))).mapInArrow(run, schema)


def _counted_rows(raw: pa.RecordBatch, topic: str, key: str, columns: dict[str, str], schema: pa.Schema,
                  counter) -> pa.RecordBatch:
    out = change_rows(raw, topic, key, columns, schema)
    if out.num_rows:
        counter.add(Counts(raw.num_rows, pc.sum(pc.equal(out.column(OP), "d")).as_py() or 0,
                           pc.min(out.column(SOURCE_TS)).as_py()))
    return out


def _newest(rows: DataFrame, key: str) -> DataFrame:
    """Each key's last change in binlog order over all tasks (a partition's range may be split over tasks)."""
    last = Window.partitionBy(key).orderBy(F.col(ORDER).desc())
    return rows.withColumn("_n", F.row_number().over(last)).filter("_n = 1").drop("_n")


def main() -> None:
    """`python -m lab.peers.cdc_merge`: the peer as a process of its own (``lab.peers.process``)."""
    from lab.peers.process import run_peer  # deferred: a process entry point, not the peer's import
    from pipeline.spark_session import build_session

    run_peer(lambda settings: MergeApplyJob(build_session(settings, "lakehouse-cdc-merge-peer"), settings))


if __name__ == "__main__":
    main()
