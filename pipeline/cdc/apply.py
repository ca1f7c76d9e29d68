"""The CDC apply on Spark: Debezium change topics merged into the dimension tables, the key state spread over the executors.

Each dimension table is partitioned by ``bucket(N, key)`` (``pipeline.cdc.buckets``), and the
apply's key state is split into P partitions, as many as the application has cores (at most
N): partition *p* holds buckets *p*, *p* + P, ... of every table (each bucket's key index and
live files). The state is built in one wave of P tasks, one a core, so each executor holds the
share of it its cores are of the whole, and keeps it on its local disk (``held_state``): what
Spark caches for a partition is only a small ``Held``, whose block keeps the partition's next
task on that executor. A batch is one Spark job (the tasks' functions: ``tasks``):

1. **read**: tasks fetch the batch's planned Kafka ranges (``kafka_source.stream.PartitionReader``), decode the
   envelopes (``cdc.changes``) and cut them by key bucket. A small batch is read by every
   partition's task for itself (one stage); a large one (the initial snapshot) in a stage of
   its own, whose shuffle brings each bucket's changes to the partition that holds the bucket;
2. **apply**: task *p* claims its buckets from the executor's disk and applies their changes
   (``buckets.apply``): a fold when one is due, one data file of after-images and one
   position-delete file per bucket and table. It keeps its buckets as the next version of the
   state; the files they wrote go to the driver (an accumulator).

The driver plans the ranges and commits one snapshot per table with all buckets' files and the
topic's end offsets (``RowDelta``): the offsets in the snapshot stay the only record of
progress. The state is always the state *of the last committed snapshot*: the ``Held`` blocks
of a batch replace the old ones only after every table committed; a failed batch (a task, a
commit, a lost executor) drops them, and ``recover`` builds the state again from the tables
— which is also how the apply takes over tables another writer left (the Python apply, a
compaction by maintenance). A task that finds its state gone or in another version than its
``Held`` says raises ``StateNotHere``, and the batch runs again on a state built anew. The
cached blocks are local checkpoints: Spark never recomputes one from its lineage (that would
apply old batches again); a lost one fails the batch, and the state is read again.

Why not Structured Streaming with ``transformWithStateInPandas``: its state store keeps its
own checkpoint of offsets and state, which would have to be brought back in step with the
Iceberg snapshot after every crash, and a state row per key cost more per batch in Python than
this whole apply (docs/cdc.md). Why not ``MERGE INTO``: it reads every key of the table each
batch (``lab.peers.cdc_merge``, measured in docs/cdc.md).
"""

from __future__ import annotations

import json
import logging
import re
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

from py4j.protocol import Py4JJavaError
from pyspark import RDD, StorageLevel
from pyspark.serializers import BatchedSerializer, CPickleSerializer
from pyspark.sql import SparkSession

from lakehouse.catalog import pyiceberg_catalog
from lakehouse.errors import FatalError
from lakehouse.settings import Settings
from pipeline import metrics
from pipeline.capture.schema_history import SchemaRecord, SchemaWatch
from pipeline.cdc.buckets import BUCKET_FIELD, Outcome, TableWork, bucket_count
from pipeline.cdc.change_reading import ChangeReading, by_bucket
from pipeline.cdc.dimension_tables import ensure_dimension_tables
from pipeline.cdc.held_state import StateNotHere
from pipeline.cdc.table_evolution import HISTORY_PROPERTY, plan, stage
from pipeline.cdc.targets import Target, targets
from pipeline.cdc.tasks import Outcomes, build_state, read_and_step, step
from pipeline.kafka_source import offsets as kafka_offsets
from pipeline.kafka_source.batch_job import Batch, KafkaBatchJob
from pipeline.kafka_source.stream import KafkaStream
from pipeline.lake_writer.catalog_tables import newest_summary_with
from pipeline.lake_writer.expiry import expire_old_snapshots
from pipeline.lake_writer.fold import FoldPolicy
from pipeline.lake_writer.pyiceberg_internals import CachedTransaction
from pipeline.lake_writer.row_delta import RowDelta

log = logging.getLogger(__name__)

#: one element per batch of pickled data: a state partition holds one ``Held`` and a shuffled changes partition one
#: dict, and two RDDs zip without a re-serializing pass only when their serializers are equal
ONE = BatchedSerializer(CPickleSerializer(), 1)


def _reason(error: Py4JJavaError) -> str:
    """The Python task's own message in a failed Spark job's error."""
    found = re.search(rf"{StateNotHere.__name__}: (.*)", str(error))
    return found.group(1) if found else str(error).splitlines()[0]


class DimensionApplyJob(KafkaBatchJob):
    """The CDC apply job on Spark (module docstring): ``lakehouse run dims``."""

    name = "dims"

    def __init__(self, spark: SparkSession, settings: Settings):
        self.spark, self.settings = spark, settings
        self.sc = spark.sparkContext
        ensure_dimension_tables(settings)
        self.history = SchemaWatch(settings)
        self.targets: dict[str, Target] = targets(settings, self.history.latest())
        self.tables = [t.table for t in self.targets.values()]
        self.stream = KafkaStream.from_settings(settings, list(self.targets), settings.pipeline.cdc_max_records)
        # a catalog (one metastore connection) per table: the tables commit side by side
        self.catalogs = {topic: pyiceberg_catalog(settings) for topic in self.targets}
        self._threads = ThreadPoolExecutor(len(self.targets), thread_name_prefix="dims")
        self.policy = FoldPolicy()
        self.outcomes = self.sc.accumulator({}, Outcomes())
        self.state: RDD | None = None
        self.buckets = {topic: self._bucketed(topic) for topic in self.targets}
        self.recover()

    # -- the state ---------------------------------------------------------------------------------------------

    def recover(self) -> None:
        """Read every table again, build the key state from them, and read where each topic is applied up to."""
        self.handles = {topic: self.catalogs[topic].load_table(t.table) for topic, t in self.targets.items()}
        works = self._works()
        buckets = max(self.buckets.values())
        per_bucket: list[dict[str, list]] = [{} for _ in range(buckets)]
        for topic, table in self.handles.items():
            key = works[topic].key
            for task in table.scan(selected_fields=(key,)).plan_files():
                per_bucket[task.file.partition[0]].setdefault(topic, []).append(
                    (task.file, list(task.delete_files)))
        began = time.monotonic()
        # as many partitions as the application has cores (at most one a bucket): all are built in one wave, one a
        # core, so each executor gets the share of the state its cores are of the whole, and keeps it (locality)
        self.partitions = max(1, min(buckets, self.sc.defaultParallelism))
        parts = [(p, {b: per_bucket[b] for b in range(p, buckets, self.partitions)}) for p in range(self.partitions)]
        state = self.sc.parallelize(parts, self.partitions) \
            .map(build_state(works, self.policy.fold_files, uuid.uuid4().hex))._reserialize(ONE)
        self._swap(self._checkpointed(state))
        log.info("dims: key state of %s buckets in %d partitions built in %.1fs",
                 ", ".join(f"{self.targets[t].table}: {n}" for t, n in self.buckets.items()), self.partitions,
                 time.monotonic() - began)
        self.committed: kafka_offsets.Offsets = {}
        self.committed_ids: dict[str, str] = {}
        for topic, table in self.handles.items():
            position = self.stream.initial_offset(newest_summary_with(table, kafka_offsets.OFFSETS_PROPERTY))
            self.committed.update({t: o for t, o in position.offsets.items() if t == topic})
            self.committed_ids.update({t: i for t, i in position.topic_ids.items() if t == topic})

    def _checkpointed(self, rdd: RDD) -> RDD:
        """``rdd`` cached where computed, never recomputed from its lineage; computed now (without Python).

        Returned as an RDD of its own over the same Spark RDD: a PySpark RDD keeps the one it was derived from
        (``PipelinedRDD.prev``), so each batch's state would hold every earlier batch's, with its closures and,
        through them, the driver JVM's objects for them, growing both driver processes by each batch."""
        rdd.persist(StorageLevel.MEMORY_AND_DISK)
        rdd.localCheckpoint()
        rdd._jrdd.count()
        held: RDD = RDD(rdd._jrdd, self.sc, rdd._jrdd_deserializer)
        held.is_cached = held.is_checkpointed = True
        return held

    def _swap(self, state) -> None:
        old, self.state = self.state, state
        if old is not None:
            old.unpersist()

    def _bucketed(self, topic: str) -> int:
        """The table's bucket count N: partitioned by ``bucket(N, key)`` first if it is not yet (N from the settings),
        its files rewritten into the buckets. A table already bucketed keeps its N."""
        target = self.targets[topic]
        table = self.catalogs[topic].load_table(target.table)
        key = table.schema().find_field(target.renames.get(target.key, target.key))
        have = bucket_count(table.spec(), key.field_id)
        wanted = self.settings.pipeline.cdc_buckets
        if have is None and table.spec().fields:
            raise FatalError(f"{target.table} is partitioned as {table.spec()}, not by bucket(N, {key.name}) alone: "
                             "the apply keeps each bucket's rows in files of their own. Drop the other partition "
                             "fields, or rebuild the table from the source")
        if have is not None and have != wanted:
            log.info("dims: %s keeps its %d buckets (pipeline.cdc_buckets=%d applies to tables not yet bucketed)",
                     target.table, have, wanted)
        if have is None:
            from pyiceberg.transforms import BucketTransform  # deferred: once per table, on its first start

            with table.update_spec() as spec:
                spec.add_field(key.name, BucketTransform(wanted), BUCKET_FIELD)
            log.info("dims: %s partitioned by bucket(%d, %s)", target.table, wanted, key.name)
        table = self.catalogs[topic].load_table(target.table)
        stale = [t for t in table.scan().plan_files() if t.file.spec_id != table.spec().spec_id]
        if stale:
            began = time.monotonic()
            self.spark.sql(f"CALL {self.settings.catalog.name}.system.rewrite_data_files(table => '{target.table}', "
                           "options => map('rewrite-all', 'true', 'remove-dangling-deletes', 'true'))").collect()
            log.warning("dims: %s's %d files rewritten into its buckets in %.1fs", target.table, len(stale),
                        time.monotonic() - began)
        return have or wanted

    def _works(self) -> dict[str, TableWork]:
        out = {}
        for topic, table in self.handles.items():
            target, buckets = self.targets[topic], self.buckets[topic]
            # a bucket's share of the table: files of a bucket's size; a fold rewrites at most one such file's rows,
            # since it runs inside a batch (at 10 M rows, folds of 750,000 rows took 1.5-2.2 s of their batch)
            rows = max(self.policy.target_rows // buckets, 100_000)
            policy = replace(self.policy, target_rows=rows, max_rewrite_rows=min(self.policy.max_rewrite_rows, rows))
            out[topic] = TableWork(target.table, table.metadata, dict(table.io.properties),
                                   target.renames.get(target.key, target.key), self._columns(table, target), policy,
                                   buckets)
        return out

    @staticmethod
    def _columns(table, target: Target) -> dict[str, str]:
        lake_to_source = {lake: source for source, lake in target.renames.items()}
        return {f.name: lake_to_source.get(f.name, f.name) for f in table.schema().fields}

    # -- a batch -----------------------------------------------------------------------------------------------

    def close(self) -> None:
        self._threads.shutdown(wait=True)
        self._swap(None)
        self.stream.close()

    def write(self, batch: Batch, retrying: bool = False) -> int:
        """One Spark job applies the batch in every bucket; then one commit per table, side by side. A task that
        finds no state on its executor (``StateNotHere``) makes the apply build it again and run the batch once
        more."""
        topics = sorted({r.topic for r in batch.work})
        changed = self._follow_schemas(topics, self.history.latest())
        works = {topic: w for topic, w in self._works().items() if topic in topics}
        reading = self._reading(batch, works)
        self.outcomes.value = {}
        began = time.monotonic()
        try:
            new = self._apply(batch, reading, works)
        except Py4JJavaError as error:
            if StateNotHere.__name__ not in str(error) or retrying:
                raise
            log.warning("dims: %s; building the key state again from the tables", _reason(error))
            self.recover()
            return self.write(batch, retrying=True)
        applied = time.monotonic() - began
        by_bucket: dict[int, dict[str, Outcome]] = dict(self.outcomes.value)
        try:
            counts = list(self._threads.map(
                lambda topic: self._commit(topic, [by_bucket[b][topic] for b in sorted(by_bucket) if topic in by_bucket[b]],
                                           batch.end[topic], changed.get(topic, {})), topics))
        except BaseException:
            new.unpersist()
            raise
        self._swap(new)
        self._observe(works, by_bucket, applied)
        folds = [o.fold for done in by_bucket.values() for o in done.values() if o.fold]
        log.info("dims: %d changes: Spark job %.2fs (slowest bucket %.2fs%s), commits %.2fs", sum(counts), applied,
                 max((o.seconds for done in by_bucket.values() for o in done.values()), default=0),
                 "".join(f"; a fold: plan {f['plan']:.2f}s, write {f['write']:.2f}s ({f['rows']:,.0f} rows, "
                         f"{f['delete files']:.0f} delete files), index {f['index']:.2f}s" for f in folds),
                 time.monotonic() - began - applied)
        return sum(counts)

    def _apply(self, batch: Batch, reading: ChangeReading, works: dict[str, TableWork]) -> RDD:
        """The batch's Spark job: the state after it, computed and cached (the state before stays until the commits)."""
        assert self.state is not None  # built in __init__ (recover)
        if sum(r.end - r.start for r in batch.work) > self.settings.pipeline.cdc_shuffle_records:
            changes = self.sc.parallelize(range(len(reading.groups)), max(1, len(reading.groups))) \
                .mapPartitions(reading.read).partitionBy(self.partitions, lambda bucket: bucket) \
                .glom().map(by_bucket)._reserialize(ONE)
            batch_state = self.state.zip(changes).map(step(works, self.outcomes))
        else:
            batch_state = self.state.mapPartitions(read_and_step(reading, works, self.outcomes))
        return self._checkpointed(batch_state._reserialize(ONE))

    def _reading(self, batch: Batch, works: dict[str, TableWork]) -> ChangeReading:
        """How the batch's tasks read its changes: its planned ranges in one group a core."""
        return ChangeReading.of(batch, works, {t: self.targets[t].key for t in works}, self.stream,
                                self.sc.defaultParallelism)

    def _follow_schemas(self, topics: list[str], schemas: dict[str, SchemaRecord]) -> dict[str, dict[str, str]]:
        """Commit each table's schema change the capture recorded (a column added, a type widened) before the
        batch that may carry it; returns the snapshot properties that name it in the batch's commit."""
        out = {}
        for topic in topics:
            target, table = self.targets[topic], self.handles[topic]
            record = schemas.get(target.source_table)
            if record is None:
                continue
            changes = plan(table.schema(), record, target.renames)
            if not changes:
                continue
            history = json.loads(table.properties.get(HISTORY_PROPERTY, "[]"))
            with table.transaction() as tx:
                out[topic] = stage(tx, changes, record, history)
            self.handles[topic] = self.catalogs[topic].load_table(target.table)
            log.warning("dims: %s follows its source: %s", target.table,
                        ", ".join(f"{c.action} {c.column} {c.type}" for c in changes))
        return out

    def _commit(self, topic: str, outcomes: list[Outcome], ends: dict[int, int], extra: dict[str, str]) -> int:
        """Every bucket's files for ``topic``'s table: the folds' first, as a ``replace`` of their own (the same
        rows in other files: incremental readers skip it), then the batch's in one snapshot with the topic's end
        offsets."""
        target, table = self.targets[topic], self.handles[topic]
        began = time.monotonic()
        removed = [f for o in outcomes for f in o.fold_removed]
        if removed:
            with CachedTransaction(table) as tx:
                fold = RowDelta(tx, table.io, {}, rewrite=True, same_rows=True)
                with fold:
                    for file in removed:
                        fold.remove(file)
                    for outcome in outcomes:
                        for file in outcome.fold_added:
                            fold.add(file)
        properties = {**self.stream.commit({topic: ends}), **extra}
        with CachedTransaction(table) as tx:
            delta = RowDelta(tx, table.io, properties)
            with delta:
                for outcome in outcomes:
                    for file in outcome.added:
                        delta.add(file)
        if removed:
            expire_old_snapshots(table, self.settings.maintenance)
        took = time.monotonic() - began
        metrics.COMMIT_SECONDS.labels(target.table).observe(took)
        metrics.LAST_COMMIT.labels(target.table).set(time.time())
        upserts, deletes = sum(o.upserts for o in outcomes), sum(o.deletes for o in outcomes)
        metrics.CDC_APPLIED.labels(target.table, "upsert").inc(upserts)
        metrics.CDC_APPLIED.labels(target.table, "delete").inc(deletes)
        oldest = [o.oldest_ms for o in outcomes if o.oldest_ms is not None]
        if oldest:
            metrics.DIMENSION_APPLY_LAG.labels(target.table).set(time.time() - min(oldest) / 1000)
        log.info("dims: %d changes into %s in %.2fs", upserts + deletes, target.table, took)
        return upserts + deletes

    def _observe(self, works: dict[str, TableWork], by_bucket: dict[int, dict[str, Outcome]], applied: float) -> None:
        """The batch's Spark job time, each bucket's keys and index size, and the index bytes each executor holds."""
        metrics.CDC_STAGE_SECONDS.labels("apply").observe(applied)
        per_partition: dict[int, int] = {}
        for bucket, done in by_bucket.items():
            for topic, outcome in done.items():
                table = works[topic].table
                metrics.CDC_STATE_KEYS.labels(table, str(bucket)).set(outcome.live_keys)
                metrics.CDC_STATE_BYTES.labels(table, str(bucket)).set(outcome.index_bytes)
                partition = bucket % self.partitions
                per_partition[partition] = per_partition.get(partition, 0) + outcome.index_bytes
        self._gauge_executors(per_partition)

    def _gauge_executors(self, per_partition: dict[int, int]) -> None:
        """Key index bytes each executor holds: each state partition's, by the executor whose block manager holds
        the partition's cached ``Held`` (Spark's status store, as the UI's Storage tab shows it) — the executor the
        scheduler sends the partition's next task to, and whose disk holds its files."""
        assert self.state is not None
        store = self.sc._jsc.sc().statusStore()
        try:
            parts = store.rdd(self.state.id()).partitions()
        except Py4JJavaError:  # not reported yet: the gauges keep the last batch's figures
            return
        if not parts.isDefined() or not parts.get().size():
            return
        held: dict[str, int] = {}
        for i in range(parts.get().size()):
            part = parts.get().apply(i)
            partition = int(part.blockName().rsplit("_", 1)[1])
            for j in range(part.executors().size()):
                executor = part.executors().apply(j)
                held[executor] = held.get(executor, 0) + per_partition.get(partition, 0)
        metrics.CDC_STATE_EXECUTOR_BYTES.clear()
        for executor, size in held.items():
            metrics.CDC_STATE_EXECUTOR_BYTES.labels(executor).set(size)
