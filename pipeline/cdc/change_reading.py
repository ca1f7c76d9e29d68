"""How the CDC apply's tasks read a batch: the planned Kafka ranges fetched, the envelopes decoded, cut by key bucket.

A ``ChangeReading`` is built on the driver (``ChangeReading.of``: the batch's ranges in one
partition a core, as ``KafkaStream.partitions`` cuts them, each topic's key, after-image fields
and key type) and pickled into the batch's tasks, which read their partitions (``read``): a large
batch in a stage of its own whose output is shuffled to the buckets, a small one by every state
partition's task for its own buckets (``pipeline.cdc.apply``). ``by_bucket`` gathers a partition's
share into one table per bucket and topic.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
from pyiceberg.types import IcebergType

from pipeline.cdc.buckets import TableWork, buckets_of
from pipeline.cdc.changes import parse_changes
from pipeline.cdc.images import image_struct
from pipeline.kafka_source.batch_job import Batch
from pipeline.kafka_source.stream import KafkaStream, PartitionReader, RangePartition
from pipeline.native_memory import give_back_freed


@dataclass(frozen=True)
class ChangeReading:
    """What a task needs to read a batch's changes: the batch's partitions, and how to decode and cut them."""

    groups: list[RangePartition]
    reader: PartitionReader
    keys: dict[str, str]
    images: dict[str, pa.StructType | None]
    key_types: dict[str, tuple[IcebergType, pa.DataType]]
    buckets: dict[str, int]

    @classmethod
    def of(cls, batch: Batch, works: dict[str, TableWork], keys: dict[str, str], stream: KafkaStream,
           tasks: int) -> ChangeReading:
        """The batch's planned ranges cut into at most ``tasks`` partitions, and each topic's decoding."""
        groups = stream.partitions(batch.work, tasks)
        images, key_types = {}, {}
        for topic, work in works.items():
            schema = work.metadata.schema()
            images[topic] = image_struct(work.columns, schema.as_arrow())
            field = schema.find_field(work.key)
            key_types[topic] = (field.field_type, schema.as_arrow().field(work.key).type)
        return cls(groups, stream.reader, keys, images, key_types,
                   {topic: work.buckets for topic, work in works.items()})

    def read(self, indexes, only: set[int] | None = None):
        """The changes of the partitions ``indexes``, as (bucket, (topic, changes)); of the buckets ``only`` when
        given."""
        for i in indexes:
            for raw in self.reader.read(self.groups[i]):
                topic = raw.column(0)[0].as_py()  # a batch holds the records of one range
                changes = pa.Table.from_batches([parse_changes(raw, {topic: self.keys[topic]},
                                                               {topic: self.images[topic]})])
                if not changes.num_rows:
                    continue
                of = buckets_of(changes.column("pk").combine_chunks(), *self.key_types[topic], self.buckets[topic])
                for bucket in np.unique(of).tolist():
                    if only is None or bucket in only:
                        yield bucket, (topic, changes.filter(pa.array(of == bucket)))
        give_back_freed()  # a long-lived Python worker: the decoded records go back


def by_bucket(pairs: list) -> dict[int, dict[str, pa.Table]]:
    """One partition's changes: by bucket, one table per topic."""
    parts: dict[int, dict[str, list[pa.Table]]] = {}
    for bucket, (topic, changes) in pairs:
        parts.setdefault(bucket, {}).setdefault(topic, []).append(changes)
    return {bucket: {topic: pa.concat_tables(tables, promote_options="permissive") for topic, tables in topics.items()}
            for bucket, topics in parts.items()}
