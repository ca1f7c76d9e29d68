"""The click ingestion job: each micro-batch planned on the driver, done by standing Spark tasks, committed once.

One Spark job of ``pipeline.click_tasks`` tasks runs for the job's life
(``pipeline.standing_tasks``). Each batch the driver plans the offset ranges (``KafkaStream``)
and sends every task the ranges of its Kafka partitions (partition p to task p mod tasks, so
each task's consumer goes on where it stopped); the tasks read, validate, enrich and write
Parquet data files (``pipeline.clicks.task``), and the driver commits all their files with
the batch's end offsets in one ``append`` snapshot of the click table. A Spark job per batch
cost more than the batch's work at short triggers (docs/performance.md).

Each commit carries the batch's end offsets: the click table's offsets are where the job
resumes. It also records ``lakehouse.dead-letters-done``: offsets up to which every dead
letter is already in the dead-letter table (the start of this batch, or of the oldest batch whose
dead letters are not committed yet). Dead letters come back from the tasks and are committed
together every ``pipeline.dead_letter_seconds`` in the background while the next batches run
(``pipeline.clicks.dead_letters``). A crash leaves the dead letters of those batches unwritten;
the first batch after ``recover`` reads exactly those again and writes only them, since a dead-letter write
keeps only records past the offsets *its* table committed. Both tables receive every record
exactly once.

A batch whose records carry a field the table has no column for (under policy ``evolve``) is
written by the driver: schema change, rows and offsets in one commit (``evolving_batch``).

The job merges the small files its batches write as it goes (``file_merges``: the standing
tasks write their own files' kept rows again as one, a Spark job in the background merges
those, each committed as a ``replace`` snapshot between two batch commits, under the same
lock); the click table's offsets are only ever moved by the batches' own commits.
"""

from __future__ import annotations

import datetime as dt
import functools
import logging
import threading
import time

import pyarrow as pa
import pyarrow.compute as pc
from pyiceberg.table import Table

from lakehouse.catalog import pyiceberg_catalog
from lakehouse.settings import Settings
from pipeline import metrics, table_commits
from pipeline.cdc.dimension_tables import ensure_dimension_tables
from pipeline.clicks import evolving_batch
from pipeline.clicks.batch_stats import BatchStats, observe_latency
from pipeline.clicks.dead_letters import DeadLetterQueue, Owed, carried_table, dead_letter_rows
from pipeline.clicks.evolution import ARROW_TYPES, Shape
from pipeline.clicks.file_merges import FileMerges
from pipeline.clicks.task import ClickShare, ClickTask, ClickWork
from pipeline.clicks.validate import RESERVED_NAMES, Limits, parse_batch, parsed_schema
from pipeline.dimensions import DimensionCache
from pipeline.kafka_source import offsets as kafka_offsets
from pipeline.kafka_source.batch_job import Batch, KafkaBatchJob
from pipeline.kafka_source.ranges import OffsetRange
from pipeline.kafka_source.stream import KafkaStream, RangePartition
from pipeline.lake_writer.catalog_tables import commit_once, newest_summary_with
from pipeline.lake_writer.pyiceberg_internals import CachedTransaction, HeldMetadataHiveCatalog
from pipeline.standing_tasks import StandingTasks, driver_address
from pipeline.tables import CLICKS_FIXED_COLUMNS, DEAD_DONE_PROPERTY, ensure_clicks_tables

log = logging.getLogger(__name__)


class ClickIngestJob(KafkaBatchJob):
    name = "clicks"

    def __init__(self, spark, settings: Settings):
        self.spark, self.settings = spark, settings
        cat = settings.catalog
        ensure_clicks_tables(spark, settings)
        ensure_dimension_tables(settings)
        # read with PyIceberg on the driver and sent to the tasks: a Spark job would wait for a task slot
        self.dimensions = DimensionCache(None, settings)
        self.stream = KafkaStream.from_settings(settings, [settings.kafka.clicks_topic])
        self.limits = Limits.of(settings)
        self.clicks_table, self.dead_table = cat.clicks_table, cat.dead_letter_table
        self.tables = [self.clicks_table, self.dead_table]
        # catalogs that do not read back the metadata file of their own last commit
        self.catalog = pyiceberg_catalog(settings, HeldMetadataHiveCatalog)
        # the background thread's own: a client is not shared
        self._dead_catalog = pyiceberg_catalog(settings, HeldMetadataHiveCatalog)
        self._dead_letters = DeadLetterQueue("clicks-dead-letters", settings.pipeline.dead_letter_seconds,
                                             self._write_dead_letters)
        #: held by every use of ``self.catalog`` and ``self.clicks``'s commits: the file merges commit from a thread
        self._commit_lock = threading.Lock()
        self.merges = FileMerges(spark, settings.pipeline.merge_seconds, settings.pipeline.merge_fan_in,
                                 self._commit_merge, self.name)
        self.tasks: StandingTasks | None = None
        self._sent: dict[int, tuple] = {}  # task -> (dimension snapshot time, table schema and spec) it holds
        self.recover()

    def recover(self) -> None:
        """(Re)load where each table stands (the tables are the only checkpoint) and start the tasks afresh.

        The dead letters of the batches since the position the click table records as done (owed
        when the job stopped, or in a commit that failed) are written at the start of the next batch.
        The dimension snapshot is dropped too, so nothing a failed batch read survives it.
        """
        try:
            self._dead_letters.settle(wait=True)  # the tables, read next, must not move under us
        except Exception as exc:  # noqa: BLE001 - what it did not write, the catch-up below writes
            log.warning("clicks: the last dead-letter commit failed (%s); writing them again", exc)
        self._dead_letters.drop()  # what was owed, the catch-up below reads again
        self.dimensions.invalidate()
        self.merges.forget()  # the files of a failed life are maintenance's
        with self._commit_lock:
            self.clicks = self.catalog.load_table(self.clicks_table)
        self.dead = self._dead_catalog.load_table(self.dead_table)
        found = newest_summary_with(self.clicks, kafka_offsets.OFFSETS_PROPERTY)
        start = self.stream.initial_offset(found)
        self.committed, self.committed_ids = start.offsets, start.topic_ids
        dead = kafka_offsets.position_of(newest_summary_with(self.dead, kafka_offsets.OFFSETS_PROPERTY))
        self.dead_committed, self.dead_committed_ids = dead.offsets, dead.topic_ids
        self.shape = self._table_shape()
        log.info("clicks resume from %s (dead-letter at %s)", self.committed, self.dead_committed)
        # Commits made before the property existed wrote dead letters first: complete up to the click offsets.
        done = found.get(DEAD_DONE_PROPERTY)
        # Written by the next batch before anything else: if that fails, the batch fails and comes back here.
        self._dead_letters_done: kafka_offsets.Offsets | None = (
            kafka_offsets.decode(done) if done is not None else self.committed)
        if self.tasks is not None:  # new ones start with the next batch: none survives a failure
            self.tasks.close()
            self.tasks = None

    def _start_tasks(self) -> StandingTasks:
        """The standing tasks, started by the first batch after a start or a recovery (a failure to start is the
        batch's, which the runner retries)."""
        kafka = self.settings.kafka
        self._sent = {}
        return StandingTasks(self.spark, self.settings.pipeline.click_tasks,
                                   functools.partial(ClickTask, kafka.bootstrap, kafka.fetch_wait_max_ms), self.name,
                                   driver_address(self.spark, self.settings.metrics.host))

    def _table_shape(self) -> Shape:
        """The click table's evolved columns as the table has them now, and the configured policy."""
        pipe = self.settings.pipeline
        # PyIceberg prints a column's type as the parser names the kind of value ("int", "string", ...)
        columns = tuple((f.name, str(f.field_type)) for f in self.clicks.schema().fields
                        if f.name not in CLICKS_FIXED_COLUMNS and str(f.field_type) in ARROW_TYPES)
        return Shape(columns, pipe.schema_policy, pipe.max_evolved_columns, RESERVED_NAMES)

    def close(self) -> None:
        try:
            self.merges.close()
            self._dead_letters.close()
        finally:
            try:
                if self.tasks is not None:
                    self.tasks.close()
            finally:
                self.dimensions.close()
                self.stream.close()

    def before_plan(self) -> None:
        """Raise a failed background dead-letter commit; commit the owed ones if due; after a recovery, write the
        dead letters it owes."""
        self._settle_dead_letters(wait=False)
        self._dead_letters.flush_if_due()  # also when no batch comes: an idle stream's dead letters are not kept
        if self._dead_letters_done is not None:
            self._catch_up_dead_letters(self._dead_letters_done)
            self._dead_letters_done = None

    def write(self, batch: Batch) -> int:
        """The batch's ranges to the standing tasks, their files committed with the batch's end offsets."""
        planned_at_ms = int(time.time() * 1000)
        metrics.BATCH_PHASE_SECONDS.labels("plan").observe(batch.planned_at - batch.began)
        now = dt.datetime.now(dt.timezone.utc)
        shares = self._run_tasks(batch, now, planned_at_ms)
        # Every dead letter before this batch's start is committed (recover() or the earlier batches wrote it),
        # unless an earlier batch's are still owed: then only up to that batch's start (in this log of the topics).
        self._dead_letters.finish_other_logs(dict(self.stream.topic_ids))
        done = self._dead_letters.owed_from or batch.start
        if shares is None:
            counted = self._evolve(batch.work, batch.end, done, now, planned_at_ms)
        else:
            counted = BatchStats()
            for share in shares.values():
                counted.merge(share.stats)
            self._commit([f for share in shares.values() for f in share.files],
                         {**self.stream.commit(batch.end), DEAD_DONE_PROPERTY: kafka_offsets.encode(done)}, batch.end)
            self.merges.added({i: share.files for i, share in shares.items()},
                              {i: share.merged for i, share in shares.items()}, self.clicks)
        committed_at_ms = int(time.time() * 1000)
        metrics.BATCH_PHASE_SECONDS.labels("write").observe(time.monotonic() - batch.planned_at)
        if counted.dead:
            self._settle_dead_letters(wait=False)  # a failed commit is raised before more is owed
            self._dead_letters.add(Owed(batch.work, counted, batch.end, dict(self.stream.topic_ids), now), batch.start)
        observe_latency(self.clicks_table, counted.ages.items(), committed_at_ms - planned_at_ms)
        for phase, seconds in counted.task_seconds.items():
            metrics.TASK_PHASE_SECONDS.labels(self.name, phase).inc(seconds)
        metrics.ROWS.labels(self.name, "valid").inc(counted.valid)
        metrics.ROWS.labels(self.name, "dead_letter").inc(counted.dead)
        log.debug("clicks: committed %d valid + %d dead-lettered in %.2fs", counted.valid, counted.dead,
                  time.monotonic() - batch.began)
        return counted.valid + counted.dead

    def _run_tasks(self, batch: Batch, now: dt.datetime, planned_at_ms: int) -> dict[int, ClickShare] | None:
        """Each task's share of the batch (and of the merges due); ``None`` when a task found fields the table has
        no column for."""
        if self.tasks is None:
            self.tasks = self._start_tasks()
        dims = self.dimensions.current().value
        table_key = (self.clicks.metadata.current_schema_id, self.clicks.metadata.default_spec_id)
        messages = {}
        for index in range(self.tasks.count):
            held = self._sent.get(index, (None, None))
            messages[index] = ClickWork(
                [r for r in batch.ranges if r.partition % self.tasks.count == index], self.shape, self.limits, now,
                planned_at_ms, dims if held[0] != dims.read_at else None,
                (self.clicks.metadata, dict(self.clicks.io.properties)) if held[1] != table_key else None,
                self.merges.for_task(index))
            self._sent[index] = (dims.read_at, table_key)
        answers = self.tasks.run(messages)
        if any(answer is None for answer in answers.values()):
            return None
        return answers

    def _commit(self, files: list, properties: dict[str, str], end: kafka_offsets.Offsets) -> None:
        """One ``append`` snapshot of the tasks' files and the offsets (what the live aggregates read)."""
        began = time.monotonic()

        def stage(tx) -> None:
            with tx.update_snapshot(snapshot_properties=properties).fast_append() as append:
                for file in files:
                    append.append_data_file(file)

        with self._commit_lock:
            self.clicks = commit_once(self.catalog, self.clicks, stage, functools.partial(_stands_at, end), self.name)
        table_commits.announce(self.clicks_table)
        metrics.COMMIT_SECONDS.labels(self.clicks_table).observe(time.monotonic() - began)
        metrics.LAST_COMMIT.labels(self.clicks_table).set(time.time())

    def _commit_merge(self, stage) -> None:
        """Commit a merge of small files (``file_merges``) once, between two batch commits; a lost race raises."""
        with self._commit_lock, CachedTransaction(self.clicks) as tx:
            stage(tx)

    def _evolve(self, work: list[OffsetRange], target: kafka_offsets.Offsets, done: kafka_offsets.Offsets,
                now: dt.datetime, planned_at_ms: int) -> BatchStats:
        """Write the batch whose fields the table lacks: schema change, rows and offsets in one commit.

        Its dead letters follow as any batch's do (carried in the returned stats, committed in the background).
        """
        log.info("clicks: the batch carries fields the click table has no column for: writing it as an evolving "
                 "batch (schema change, rows and offsets in one commit)")
        properties = {**self.stream.commit(target), DEAD_DONE_PROPERTY: kafka_offsets.encode(done)}
        self.merges.forget()  # the files before the change are maintenance's: a merge reads one schema
        with self._commit_lock:  # no merge commits beside the schema change
            result = evolving_batch.write(self.settings, work, self.shape, self.limits,
                                          self.dimensions.current().value, properties, now, planned_at_ms)
            self.clicks = self.catalog.load_table(self.clicks_table)  # the new schema: the tasks get it next
        self.shape = result.shape
        table_commits.announce(self.clicks_table)
        metrics.LAST_COMMIT.labels(self.clicks_table).set(time.time())
        for change in result.changes:
            metrics.SCHEMA_CHANGES.labels(self.clicks_table, change.action).inc()
            log.warning("clicks: the click table %s evolved: %s (in the commit of offsets up to %s)", self.clicks_table,
                        change.describe(), target)
        return result.stats

    def _settle_dead_letters(self, wait: bool) -> None:
        """Raise the error of a finished background dead-letter commit (its batch is caught up after recovery)."""
        in_flight = self._dead_letters.in_flight_from
        try:
            self._dead_letters.settle(wait)
        except Exception:
            self._dead_letters_done = in_flight  # the catch-up reads from there, the owed batches too
            raise

    def _catch_up_dead_letters(self, done: kafka_offsets.Offsets) -> None:
        """Write the dead letters between ``done`` and the click offsets (the batches of the last
        ``pipeline.dead_letter_seconds`` at most; none normally)."""
        ranges = self.stream.ranges_since(done, kafka_offsets.Position(self.committed, self.committed_ids))
        if not ranges:
            return
        # Normal after any restart: the last batches' owed dead letters cannot be told from "they had none".
        log.info("clicks: reading the last committed batches again (%d records) for dead letters their stop may "
                 "have cut off", sum(r.size for r in ranges))
        ids = self.stream.topic_ids
        same_log = kafka_offsets.in_current_log(self.committed, self.committed_ids, ids)
        self._commit_dead_letters([(self._read_again(ranges), dt.datetime.now(dt.timezone.utc))], same_log,
                                  {t: ids[t] for t in same_log if t in ids})

    def _read_again(self, ranges: list[OffsetRange]) -> pa.Table:
        """The invalid records of ``ranges``, read and parsed again on the driver (a batch's dead letters when they
        were not carried back); only those are kept, read by read."""
        return pa.Table.from_batches([  # none at all if the ranges hold no data records (only markers)
            parsed.filter(pc.is_valid(parsed["error"])) for raw in self.stream.reader.read(RangePartition(tuple(ranges)))
            for parsed in (parse_batch(raw, self.limits, shape=self.shape),)], schema=parsed_schema(self.shape))

    def _write_dead_letters(self, owed: list[Owed]) -> None:
        """The background commit of some batches' dead letters: carried back by their tasks, or read again."""
        began = time.monotonic()
        last = owed[-1]
        self._commit_dead_letters(
            [(self._read_again(x.work) if x.stats.overflow else carried_table(x.stats.bad), x.now) for x in owed],
            last.end, last.topic_ids)
        metrics.BATCH_PHASE_SECONDS.labels("dead_letters").observe(time.monotonic() - began)

    def _commit_dead_letters(self, parsed: list[tuple[pa.Table, dt.datetime]], target: kafka_offsets.Offsets,
                             topic_ids: dict[str, str]) -> None:
        """Commit the dead letters in each ``parsed`` table (with its ingest time) past the dead-letter table's
        offsets, with ``target``."""
        # Dead letters committed in an earlier life of a topic say nothing about offsets in its new log.
        same_log = kafka_offsets.in_current_log(self.dead_committed, self.dead_committed_ids, topic_ids)
        rows = pa.concat_tables([dead_letter_rows(table, same_log, now) for table, now in parsed])
        if rows.num_rows:
            def stage(tx) -> None:
                tx.append(rows, snapshot_properties=kafka_offsets.commit_properties(target, topic_ids))

            self.dead = commit_once(self._dead_catalog, self.dead, stage, functools.partial(_stands_at, target),
                                    f"{self.name} dead letters")
            table_commits.announce(self.dead_table)
            metrics.LAST_COMMIT.labels(self.dead_table).set(time.time())
        self.dead_committed, self.dead_committed_ids = target, topic_ids


def _stands_at(end: kafka_offsets.Offsets, table: Table) -> bool:
    """Whether ``table``'s newest recorded offsets are ``end``: the commit that carried them landed."""
    return kafka_offsets.position_of(newest_summary_with(table, kafka_offsets.OFFSETS_PROPERTY)).offsets == end
