"""The one Kafka reader of the product's jobs, in the five roles of Spark 4's ``DataSourceStreamReader``.

``KafkaStream`` plays the driver's roles, ``PartitionReader`` the executors' one:

- ``initial_offset``: where the target table's newest snapshot with a position says the job stands;
- ``latest_offset``: each partition's last stable offset from there, capped per partition (``Planner``);
- ``partitions``: a batch's ranges cut into one ``RangePartition`` a core (``ranges.balance``);
- ``read``: a partition's records, exactly ``[start, end)`` of each range, as Arrow record batches, in a
  Spark task, by ``range_reader.RangeReader`` (``PartitionReader.read``: a consumer a read, for the CDC
  apply's tasks of one batch and the driver's reads again; the click job's standing tasks keep theirs);
- ``commit``: the end offsets as the snapshot-summary entries of the commit that writes the rows.

It is not registered as a Spark streaming source (``spark.readStream.format``): Spark's streaming engine
keeps its offsets in a checkpoint folder beside the table, a second record of progress that a crash
can part from the first. Outside the streaming engine a Python data source is a batch read each
micro-batch, which Spark plans in a Python worker every time (docs/performance.md); this reader plans
in the driver's own process.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pipeline.kafka_source.offsets import Position, commit_properties, position_of
from pipeline.kafka_source.planner import Planner, Watermarks
from pipeline.kafka_source.range_reader import RangeReader
from pipeline.kafka_source.ranges import OffsetRange, Offsets, balance

if TYPE_CHECKING:
    import pyarrow as pa

    from lakehouse.settings import Settings

#: records in one Arrow batch of a partition's read: what a task holds of a large batch (a snapshot's) at a time
BATCH_ROWS = 20_000

@dataclass(frozen=True)
class RangePartition:
    """One task's share of a batch: whole ranges, or pieces of them, read in order."""

    ranges: tuple[OffsetRange, ...]

    @property
    def size(self) -> int:
        return sum(r.size for r in self.ranges)


@dataclass(frozen=True)
class PartitionReader:
    """The executors' role: pickled into each task, it holds the broker's address and the fetch limits only."""

    bootstrap: str
    fetch_wait_ms: int = 2000
    timeout_s: float = 60.0

    def read(self, partition: RangePartition) -> Iterator[pa.RecordBatch]:
        """The partition's records as Arrow batches (``RAW_SCHEMA``), range by range: each batch holds
        records of one range (one topic and partition), and none is empty. One consumer for the partition, closed
        after, reading every range at once: one read after another on one consumer would wait for the fetch the
        broker holds at the first range's end (``kafka.fetch_wait_max_ms``) before the next could start."""
        ranges = partition.ranges
        distinct = len({(r.topic, r.partition) for r in ranges}) == len(ranges)
        # pieces of one partition (not what ``balance`` makes): in order, each on a consumer of its own
        for group in [ranges] if distinct else [[r] for r in ranges]:
            reader = RangeReader(self.bootstrap, self.fetch_wait_ms, self.timeout_s, purpose="fetch")
            try:
                yield from reader.batches(group, BATCH_ROWS)
            finally:
                reader.close()


class KafkaStream:
    """The driver's roles over a job's topics; ``reader`` is what its tasks read with."""

    def __init__(self, planner: Planner, reader: PartitionReader):
        self.planner, self.reader = planner, reader

    @classmethod
    def from_settings(cls, settings: Settings, topics: list[str], max_records: int | None = None) -> KafkaStream:
        """The stream every pipeline job reads: limits from the settings (``max_records``: the job's own cap per
        partition and batch, instead of ``pipeline.max_records_per_partition``)."""
        return cls(Planner.from_settings(settings, topics, max_records),
                   PartitionReader(settings.kafka.bootstrap, settings.kafka.fetch_wait_max_ms))

    @property
    def topic_ids(self) -> dict[str, str]:
        """Each topic's id as of the last plan: what a commit of its ranges records beside the offsets."""
        return self.planner.topic_ids

    @staticmethod
    def initial_offset(recorded: Mapping[str, str | None]) -> Position:
        """The position in a snapshot summary (or the properties read from the newest one that has them)."""
        return position_of(recorded)

    def latest_offset(self, start: Position) -> tuple[list[OffsetRange], dict[tuple[str, int], Watermarks]]:
        """A range per partition from ``start`` to the broker's last stable offset (capped), and the watermarks."""
        return self.planner.plan(start.offsets, start.topic_ids)

    @staticmethod
    def partitions(ranges: Sequence[OffsetRange], tasks: int) -> list[RangePartition]:
        """The ranges cut into at most ``tasks`` partitions of near-equal record counts."""
        return [RangePartition(tuple(group)) for group in balance(list(ranges), tasks)]

    def ranges_since(self, start: Offsets, end: Position) -> list[OffsetRange]:
        """The records from ``start`` up to ``end`` in the topics' current logs: a batch read again after a restart."""
        return self.planner.ranges_since(start, end.offsets, end.topic_ids)

    def commit(self, end: Offsets) -> dict[str, str]:
        """The snapshot-summary entries of the commit whose rows reach ``end``: the table's new position."""
        return commit_properties(end, self.topic_ids)

    def close(self) -> None:
        self.planner.close()
