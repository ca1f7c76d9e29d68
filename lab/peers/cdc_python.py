"""The CDC apply as one Python process (PyIceberg), kept as a peer of the Spark apply (``pipeline.cdc.apply``).

It was the product's apply until the apply moved onto Spark; ``lakehouse bench cdc --apply python-peer``
runs it in the apply's place, to measure the two on the same run. Reading plans the same exactly-once Kafka
ranges as the click pipeline, and reads them on
the driver: a dimension batch is hundreds of records, not worth a Spark stage, and the
upsert itself runs there too (``lab.peers.cdc_python_writer`` says why). Each batch is
collapsed per key to its last change *by source position* (binlog file, position,
row), not by arrival, so many updates of one key, delete-then-insert and replays
come out right. Each table's commit carries the offsets of its own topic.

Why replays are harmless: a batch applies, per key, the full after-image of its last
change (or deletes it). Applying that again, or a longer range that ends later,
yields the same state — so a capture restart that republishes changes, or a crash
between commits, cannot leave a wrong row.
"""

from __future__ import annotations

import functools
import logging
import time
from concurrent.futures import ThreadPoolExecutor

import pyarrow as pa
import pyarrow.compute as pc

from lab.peers.cdc_python_reader import AheadReader
from lab.peers.cdc_python_writer import DimensionWriter
from lakehouse.catalog import pyiceberg_catalog
from lakehouse.settings import Settings
from pipeline import metrics
from pipeline.capture.schema_history import SchemaRecord, SchemaWatch
from pipeline.cdc.changes import CHANGE_SCHEMA, parse_changes
from pipeline.cdc.dimension_tables import committed_position, ensure_dimension_tables
from pipeline.cdc.images import image_struct
from pipeline.cdc.targets import targets
from pipeline.kafka_source import offsets as kafka_offsets
from pipeline.kafka_source.batch_job import Batch, KafkaBatchJob
from pipeline.kafka_source.stream import KafkaStream
from pipeline.native_memory import keep_resident_small

log = logging.getLogger(__name__)

class PythonApplyJob(KafkaBatchJob):
    """The CDC apply in one Python process; ``spark`` is accepted, unused, so every job is built the same way."""

    name = "dims"

    def __init__(self, spark, settings: Settings):
        keep_resident_small()  # first: at 10 M keys the allocator kept 100+ MB of freed arrays
        self.settings = settings
        ensure_dimension_tables(settings)
        self.history = SchemaWatch(settings)
        self.targets = targets(settings, self.history.latest())
        self.tables = [t.table for t in self.targets.values()]
        self.stream = KafkaStream.from_settings(settings, list(self.targets), settings.pipeline.cdc_max_records)
        # a catalog (one metastore connection) per table: the tables commit side by side
        self.writers = {topic: DimensionWriter(pyiceberg_catalog(settings), t.table,
                                               t.renames.get(t.key, t.key), t.columns, renames=t.renames,
                                               retention=settings.maintenance)
                        for topic, t in self.targets.items()}
        self._threads = ThreadPoolExecutor(len(self.targets), thread_name_prefix="dims")
        kafka = settings.kafka
        self.keys = {topic: target.key for topic, target in self.targets.items()}
        self.reader = AheadReader(kafka.bootstrap, kafka.fetch_wait_max_ms, ahead_bytes=0)
        self._read_positions()  # the writers were just built from the tables: no second read of their indexes

    def recover(self) -> None:
        """After a failed batch: read each table again (its index, its rows when small), then its positions."""
        for writer in self.writers.values():
            writer.reload()
        self._read_positions()

    def _read_positions(self) -> None:
        """Where each topic's changes are applied up to, from the offsets its table's newest snapshot holds."""
        self.committed: kafka_offsets.Offsets = {}
        self.committed_ids: dict[str, str] = {}
        for topic, writer in self.writers.items():
            position = committed_position(writer.table)
            self.committed.update({t: o for t, o in position.offsets.items() if t == topic})
            self.committed_ids.update({t: i for t, i in position.topic_ids.items() if t == topic})

    def close(self) -> None:
        self._threads.shutdown(wait=True)
        self.reader.close()
        for writer in self.writers.values():
            writer.close()
        self.stream.close()

    def write(self, batch: Batch) -> int:
        """One upsert per table, side by side (each commits its own topic's offsets); returns the changes applied."""
        changes = self._read(batch)
        schemas = self.history.latest()  # once a batch: what the capture recorded before these changes
        applied = self._threads.map(lambda topic: self._apply(topic, changes[topic], batch.end[topic], schemas),
                                    sorted(changes))
        return sum(applied)

    def _read(self, batch: Batch) -> dict[str, pa.Table]:
        """Each topic's changes in the batch, as the reader decoded them.

        Each table's after-images are read with the records, as the table's columns stand now
        (``parse_changes``'s ``images``; a column the table gained since is in the text).
        """
        images = {topic: image_struct(w.columns, w.schema) for topic, w in self.writers.items()}
        self.reader.transform = functools.partial(parse_changes, keys=self.keys, images=images)
        parsed: dict[str, list[pa.RecordBatch]] = {}
        for changes in self.reader.read(sorted(batch.work, key=lambda r: (r.topic, r.partition))):
            if changes.num_rows:
                parsed.setdefault(changes.column("topic")[0].as_py(), []).append(changes)
        return {topic: _one_table(parsed.get(topic, [])) for topic in {r.topic for r in batch.work}}

    def _apply(self, topic: str, changes: pa.Table, ends: dict[int, int], schemas: dict[str, SchemaRecord]) -> int:
        """Apply one topic's changes to its table with the offsets; returns the changes applied."""
        target = self.targets[topic]
        began = time.monotonic()
        offsets = {topic: ends}
        self.writers[topic].apply(changes, self.stream.commit(offsets),
                                  schemas.get(target.source_table))
        metrics.COMMIT_SECONDS.labels(target.table).observe(time.monotonic() - began)
        metrics.LAST_COMMIT.labels(target.table).set(time.time())
        log.info("dims: %d changes into %s in %.2fs", changes.num_rows, target.table, time.monotonic() - began)
        return self._count(target.table, changes)

    @staticmethod
    def _count(table: str, changes: pa.Table) -> int:
        """Metrics of one table's applied changes; returns how many there were."""
        if changes.num_rows == 0:
            return 0
        deletes = pc.sum(pc.equal(changes.column("op"), "d")).as_py() or 0
        metrics.CDC_APPLIED.labels(table, "upsert").inc(changes.num_rows - deletes)
        metrics.CDC_APPLIED.labels(table, "delete").inc(deletes)
        oldest = pc.min(changes.column("source_ts_ms")).as_py()
        metrics.DIMENSION_APPLY_LAG.labels(table).set(time.time() - oldest / 1000)
        return changes.num_rows


def _one_table(batches: list[pa.RecordBatch]) -> pa.Table:
    """A topic's batches as one table: with their after-images when every batch has them alike, else without."""
    if batches and all(b.schema.equals(batches[0].schema) for b in batches):
        return pa.Table.from_batches(batches)
    return pa.Table.from_batches([b.select(CHANGE_SCHEMA.names) for b in batches], schema=CHANGE_SCHEMA)


def main() -> None:
    """`python -m lab.peers.cdc_python`: the peer as a process of its own (``lab.peers.process``)."""
    from lab.peers.process import run_peer  # deferred: a process entry point, not the peer's import

    run_peer(lambda settings: PythonApplyJob(None, settings))


if __name__ == "__main__":
    main()
