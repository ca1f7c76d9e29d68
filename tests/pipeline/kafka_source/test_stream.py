"""The one Kafka reader's five roles on the real broker: where a table says it stands, the broker's latest
offsets from there, a batch cut into partitions, each partition read exactly (again the same when a task is
retried), and the commit's entries that are the next batch's start."""

from __future__ import annotations

import pickle

import pyarrow as pa

from pipeline.kafka_source.range_reader import RAW_SCHEMA
from pipeline.kafka_source.ranges import next_offsets
from pipeline.kafka_source.stream import KafkaStream


def _read(stream: KafkaStream, partitions) -> list[tuple[int, int, bytes]]:
    """Each partition read the way a task reads it: the reader pickled into it, on its own."""
    out = []
    for part in partitions:
        reader = pickle.loads(pickle.dumps(stream.reader))
        table = pa.Table.from_batches(list(reader.read(part)), RAW_SCHEMA)
        out += zip(table.column("partition").to_pylist(), table.column("offset").to_pylist(),
                   table.column("value").to_pylist(), strict=True)
    return out


def test_the_roles_read_every_record_once_across_batches_and_resume_from_the_commit(click_settings, producer):
    topic = click_settings.kafka.clicks_topic
    producer.send(300)
    stream = KafkaStream.from_settings(click_settings, [topic], max_records=60)
    try:
        start = stream.initial_offset({})  # a table with no snapshot yet: every partition from its start
        assert start.offsets == {}
        seen: list[tuple[int, int, bytes]] = []
        batches = 0
        while True:
            ranges, marks = stream.latest_offset(start)
            assert sum(m.high for m in marks.values()) == 300
            assert all(r.size <= 60 for r in ranges), "the cap per partition and batch holds"
            work = [r for r in ranges if r.size]
            if not work:
                break
            partitions = stream.partitions(work, 2)
            assert 1 <= len(partitions) <= 2
            assert sum(p.size for p in partitions) == sum(r.size for r in work)
            batch = _read(stream, partitions)
            assert batch == _read(stream, partitions), "a retried task reads the same records"
            assert len(batch) == sum(r.size for r in work)
            seen += batch
            start = stream.initial_offset(stream.commit(next_offsets(ranges)))  # as the next batch finds it
            assert start.topic_ids == stream.topic_ids
            batches += 1
    finally:
        stream.close()
    assert batches >= 2, "300 records at 60 a partition and batch take more than one batch"
    assert len(seen) == len(set((p, o) for p, o, _ in seen)) == 300, "every record once"
    values = sorted(v for _, _, v in seen)
    assert len(set(values)) == 300
