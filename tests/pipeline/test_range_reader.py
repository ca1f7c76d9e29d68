"""``RangeReader`` on the real broker: ranges read exactly, batch after batch, with one consumer."""

from __future__ import annotations

from lakehouse.kafka_clients import end_offsets
from pipeline.kafka_source.range_reader import RangeReader
from pipeline.kafka_source.ranges import OffsetRange


def _ranges(topic: str, starts: dict[int, int], step: int, ends: dict[int, int]) -> list[OffsetRange]:
    return [OffsetRange(topic, p, starts[p], min(ends[p], starts[p] + step)) for p in sorted(starts)]


def _read(reader: RangeReader, ranges: list[OffsetRange]) -> list[tuple[int, int, bytes]]:
    batch = reader.read(ranges)
    return list(zip(*(batch.column(c).to_pylist() for c in ("partition", "offset", "value")), strict=True))


def test_consecutive_ranges_hold_every_record_once_and_a_new_start_reads_again(click_settings, producer):
    topic = click_settings.kafka.clicks_topic
    producer.send(600)
    reader = RangeReader(click_settings.kafka.bootstrap, fetch_wait_ms=100)
    try:
        probe = reader.read([OffsetRange(topic, p, 0, 0) for p in range(3)])
        assert probe.num_rows == 0, "empty ranges read nothing"
        ends = end_offsets(click_settings.kafka.bootstrap, topic)
        assert sum(ends.values()) == 600
        seen: list[tuple[int, int, bytes]] = []
        starts = {p: 0 for p in range(3)}
        while any(starts[p] < ends[p] for p in starts):  # ranges of 45: the consumer fetches past each end
            ranges = _ranges(topic, starts, 45, ends)
            got = _read(reader, ranges)
            assert sorted((p, o) for p, o, _ in got) == [(r.partition, o) for r in ranges for o in range(r.start, r.end)]
            seen += got
            starts = {r.partition: r.end for r in ranges}
        assert len(seen) == len({(p, o) for p, o, _ in seen}) == 600
        fullest = max(ends, key=ends.get)  # keyed by member: the partitions fill unevenly
        again = _read(reader, [OffsetRange(topic, fullest, 10, 30)])  # a start elsewhere: assigned afresh
        assert [(p, o) for p, o, _ in again] == [(fullest, o) for o in range(10, 30)]
        assert [v for _, _, v in again] == [v for p, o, v in seen if p == fullest and 10 <= o < 30]
    finally:
        reader.close()


def test_batches_hold_one_partition_each_at_most_rows_and_a_read_left_part_way_is_read_again(click_settings,
                                                                                               producer):
    topic = click_settings.kafka.clicks_topic
    producer.send(600)
    ends = end_offsets(click_settings.kafka.bootstrap, topic)
    ranges = [OffsetRange(topic, p, 0, ends[p]) for p in range(3)]
    reader = RangeReader(click_settings.kafka.bootstrap, fetch_wait_ms=100)
    try:
        batches = list(reader.batches(ranges, rows=50))
        assert all(0 < b.num_rows <= 50 for b in batches)
        assert all(len(set(b.column("partition").to_pylist())) == 1 for b in batches), "one partition a batch"
        got = sorted((p, o) for b in batches
                     for p, o in zip(b.column("partition").to_pylist(), b.column("offset").to_pylist(), strict=True))
        assert got == [(p, o) for p in range(3) for o in range(ends[p])]

        fullest = max(ends, key=ends.get)
        part = [OffsetRange(topic, fullest, 0, ends[fullest])]
        left = reader.batches(part, rows=10)
        assert next(left).num_rows == 10
        left.close()  # the caller stopped after one batch: the next read from the same start reads everything
        again = reader.read(part)
        assert again.column("offset").to_pylist() == list(range(ends[fullest]))
    finally:
        reader.close()


def test_ranges_read_together_must_be_of_distinct_partitions_and_pieces_of_one_are_read_in_order(click_settings,
                                                                                                 producer):
    import pytest

    from pipeline.kafka_source.stream import PartitionReader, RangePartition

    topic = click_settings.kafka.clicks_topic
    producer.send(300)
    ends = end_offsets(click_settings.kafka.bootstrap, topic)
    fullest = max(ends, key=ends.get)
    half = ends[fullest] // 2
    pieces = (OffsetRange(topic, fullest, 0, half), OffsetRange(topic, fullest, half, ends[fullest]))
    reader = RangeReader(click_settings.kafka.bootstrap, fetch_wait_ms=100)
    try:
        with pytest.raises(ValueError, match="distinct partitions"):
            reader.read(list(pieces))  # one of the two would be read, the other silently not
    finally:
        reader.close()
    batches = list(PartitionReader(click_settings.kafka.bootstrap, 100).read(RangePartition(pieces)))
    assert [o for b in batches for o in b.column("offset").to_pylist()] == list(range(ends[fullest]))
