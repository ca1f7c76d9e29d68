"""A peer of the click job: its Spark tasks kept running between batches (`bench peers --standing-triggers`).

The Spark click job (``pipeline.clicks.job``) runs a Spark job every micro-batch: planning,
task launch, the records handed from Python to the JVM, Spark's Parquet writer, then the
commit; a batch costs a fixed share of CPU and wall time whatever its size
(docs/performance.md). This peer measures the design that would remove that share while the
work stays in Spark tasks on the executors: one Spark job runs for the life of the peer, one
task a core, and each task is fed its batch's ranges over a connection to the driver
(``multiprocessing.connection``). A task reads its ranges with a Kafka consumer it keeps
(``RangeReader``), parses and enriches with the code the click job's tasks run
(``evolving_batch``), writes the rows as Parquet data files of the click table with Arrow, and
answers with the files. The driver plans the ranges as the click job does (``KafkaStream``)
and commits every task's files with the batch's end offsets in one snapshot: exactly-once as
the click job. Files a failed batch wrote are never committed (maintenance removes orphans).

What it leaves out, being a measurement: a batch whose fields would evolve the table is done
by the driver alone (``ArrowClickJob.write``), and a task that fails ends the standing job, which
the batch's recovery starts again.
"""

from __future__ import annotations

import datetime as dt
import logging
import secrets
import threading
import time
from multiprocessing.connection import Client, Listener

import pyarrow as pa
import pyarrow.compute as pc
from pyiceberg.io import load_file_io

from lab.peers.clicks_arrow import ArrowClickJob
from lab.peers.clicks_arrow_reader import RangeReader
from lakehouse.errors import TransientError
from lakehouse.settings import Settings
from pipeline import metrics
from pipeline.clicks import evolving_batch
from pipeline.clicks.batch_stats import BatchStats, count_batch, observe_latency
from pipeline.kafka_source import offsets as kafka_offsets
from pipeline.kafka_source.batch_job import Batch
from pipeline.lake_writer.pyiceberg_internals import data_files_of
from pipeline.lake_writer.row_delta import RowDelta
from pipeline.tables import DEAD_DONE_PROPERTY

log = logging.getLogger(__name__)

#: the click table's write order (``pipeline.tables``): each file sorted by it, as Spark's writer sorts
WRITE_ORDER = [("productId", "ascending"), ("event_time", "ascending")]
#: seconds the driver waits for every standing task to connect (a Python worker forked, the task launched)
CONNECT_SECONDS = 60.0


def _serve(address: tuple[str, int], authkey: bytes, bootstrap: str, fetch_wait_ms: int):
    """The standing task: connect to the driver, then do each batch it is sent until it says stop."""

    def run(indexes):
        index = next(iter(indexes))
        conn = Client(address, authkey=authkey)
        reader = RangeReader(bootstrap, fetch_wait_ms)
        metadata = io = dims = None
        try:
            conn.send(index)
            while (message := conn.recv()) is not None:
                ranges, shape, limits, now, planned_at_ms, new_dims, new_table = message
                dims = new_dims or dims
                if new_table is not None:
                    metadata, io = new_table[0], load_file_io(new_table[1], new_table[0].location)
                conn.send(_batch(reader, ranges, shape, limits, dims, metadata, io, now, planned_at_ms))
        finally:
            reader.close()
            conn.close()
        yield index

    return run


def _batch(reader, ranges, shape, limits, dims, metadata, io, now, planned_at_ms):
    """One task's share of a batch: its files, stats and bad records; or ``None`` when its fields evolve the table."""
    raw = reader.read(ranges)
    parsed_batches, changes, _ = evolving_batch.parse([raw], shape, limits, dims)
    if changes:
        return None
    stats = BatchStats()
    for part in parsed_batches:
        stats.merge(count_batch(part, planned_at_ms))
    parsed = pa.Table.from_batches(parsed_batches, schema=parsed_batches[0].schema) if parsed_batches else None
    files: list = []
    bad = None
    if parsed is not None and parsed.num_rows:
        rows = evolving_batch.click_rows(parsed, shape, now)
        if rows.num_rows:
            files = list(data_files_of(metadata, rows.sort_by(WRITE_ORDER), io))
        if stats.dead:
            bad = parsed.filter(pc.is_valid(parsed["error"]))
    return files, stats, bad


class StandingTasks:
    """One Spark job of ``count`` tasks that stay up, each fed batches by the driver (module docstring)."""

    def __init__(self, spark, settings: Settings, count: int):
        self.count = count
        authkey = secrets.token_bytes(16)
        self._listener = Listener(("127.0.0.1", 0), authkey=authkey)
        serve = _serve(self._listener.address, authkey, settings.kafka.bootstrap, settings.kafka.fetch_wait_max_ms)
        sc = spark.sparkContext
        self._failure: BaseException | None = None

        def job() -> None:
            try:
                sc.setJobDescription("clicks-standing: the standing tasks")
                sc.parallelize(range(count), count).mapPartitions(serve).collect()
            except BaseException as exc:  # noqa: BLE001 - handed to the batch that finds the tasks gone
                self._failure = exc

        self._job = threading.Thread(target=job, name="standing-tasks", daemon=True)
        self._job.start()
        self._connections: dict[int, object] = {}

        def accept() -> None:
            while len(self._connections) < count:
                conn = self._listener.accept()
                self._connections[conn.recv()] = conn

        accepting = threading.Thread(target=accept, name="standing-accept", daemon=True)
        accepting.start()
        accepting.join(CONNECT_SECONDS)
        if len(self._connections) < count:
            self._listener.close()
            raise TransientError(f"the standing tasks did not connect within {CONNECT_SECONDS:.0f}s "
                                 f"({len(self._connections)} of {count}): {self._failure}")
        self.dims_sent: dict[int, float] = {}
        self.table_sent: dict[int, tuple] = {}

    def run(self, messages: dict[int, tuple]) -> dict[int, object]:
        """Send each task its message, then collect every answer."""
        try:
            for index, message in messages.items():
                self._connections[index].send(message)
            return {index: self._connections[index].recv() for index in messages}
        except (EOFError, OSError) as exc:
            raise TransientError(f"a standing task is gone ({exc}; {self._failure})") from exc

    def close(self) -> None:
        for conn in self._connections.values():
            try:
                conn.send(None)
                conn.close()
            except OSError:
                pass
        self._job.join(30)
        self._listener.close()


class StandingClickJob(ArrowClickJob):
    """The click job's batches done by standing Spark tasks, committed by the driver (module docstring)."""

    name = "clicks-standing"

    def __init__(self, spark, settings: Settings):
        self.spark = spark
        self.tasks: StandingTasks | None = None
        super().__init__(spark, settings)

    def recover(self) -> None:
        super().recover()
        if self.tasks is not None:
            self.tasks.close()
        self.tasks = StandingTasks(self.spark, self.settings, self.spark.sparkContext.defaultParallelism)

    def close(self) -> None:
        try:
            if self.tasks is not None:
                self.tasks.close()
        finally:
            super().close()

    def write(self, batch: Batch) -> int:
        """The batch's ranges to the standing tasks (each partition always to the same task), their files committed
        with the batch's end offsets; a batch whose fields evolve the table is written by the driver."""
        assert self.tasks is not None
        planned_at_ms = int(time.time() * 1000)
        metrics.BATCH_PHASE_SECONDS.labels("plan").observe(batch.planned_at - batch.began)
        now = dt.datetime.now(dt.timezone.utc)
        dims = self.dimensions.current().value
        table_key = (self.clicks.metadata.current_schema_id, self.clicks.metadata.default_spec_id)
        messages = {}
        for index in range(self.tasks.count):
            ranges = [r for r in batch.ranges if r.partition % self.tasks.count == index]
            send_dims = dims if self.tasks.dims_sent.get(index) != dims.read_at else None
            fresh = self.tasks.table_sent.get(index) != table_key
            send_table = (self.clicks.metadata, dict(self.clicks.io.properties)) if fresh else None
            messages[index] = (ranges, self.shape, self.limits, now, planned_at_ms, send_dims, send_table)
            self.tasks.dims_sent[index], self.tasks.table_sent[index] = dims.read_at, table_key
        answers = self.tasks.run(messages)
        if any(answer is None for answer in answers.values()):
            log.info("clicks-standing: the batch evolves the table: the driver writes it")
            return super().write(batch)
        counted = BatchStats()
        files, bad = [], []
        for done, stats, dead in answers.values():
            files.extend(done)
            counted.merge(stats)
            if dead is not None:
                bad.append(dead)
        properties = {**self.stream.commit(batch.end), DEAD_DONE_PROPERTY: kafka_offsets.encode(batch.start)}
        self._commit_files(files, properties, batch.end)
        self.committed, self.committed_ids = batch.end, dict(self.stream.topic_ids)
        self._dead_letters_done = batch.start
        committed_at_ms = int(time.time() * 1000)
        metrics.BATCH_PHASE_SECONDS.labels("write").observe(time.monotonic() - batch.planned_at)
        if bad:
            self._write_dead_letters(pa.concat_tables(bad), batch.end, now)
        self._dead_letters_done = None
        observe_latency(self.clicks_table, counted.ages.items(), committed_at_ms - planned_at_ms)
        metrics.ROWS.labels(self.name, "valid").inc(counted.valid)
        metrics.ROWS.labels(self.name, "dead_letter").inc(counted.dead)
        return counted.valid + counted.dead

    def _commit_files(self, files: list, properties: dict[str, str], end: kafka_offsets.Offsets) -> None:
        """One snapshot of the tasks' files and the offsets."""
        def stage(tx) -> None:
            with RowDelta(tx, self.clicks.io, properties) as delta:
                for file in files:
                    delta.add(file)

        self._commit_once(stage, end)


def main() -> None:
    """`python -m lab.peers.clicks_standing`: the peer as a process of its own (``lab.peers.process``)."""
    # deferred: a process entry point, not the peer's import
    from lab.peers.process import run_peer
    from pipeline.spark_session import build_session

    run_peer(lambda settings: StandingClickJob(build_session(settings, "clicks-standing"), settings),
             lambda settings: settings.pipeline.trigger_seconds)


if __name__ == "__main__":
    main()
