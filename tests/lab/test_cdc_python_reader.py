"""The Python apply peer's ``AheadReader`` on the real broker: exact ranges, what was read ahead handed out
once, a new start read afresh, transaction markers."""

from __future__ import annotations

import time
import uuid

from confluent_kafka import Producer
from confluent_kafka.admin import NewTopic

from deploy.local.services.broker import admin_client
from lab.peers.cdc_python_reader import AheadReader
from lakehouse.kafka_clients import end_offsets
from pipeline.kafka_source.ranges import OffsetRange


def _records(batches) -> list[tuple[int, int, bytes]]:
    out = []
    for batch in batches:
        out += zip(*(batch.column(c).to_pylist() for c in ("partition", "offset", "value")), strict=True)
    return out


def _walk(read, read_ahead, topic: str, ends: dict[int, int], step: int) -> list[tuple[int, int, bytes]]:
    """Every record of ``topic`` through consecutive ranges of ``step``, reading ahead between them."""
    seen: list[tuple[int, int, bytes]] = []
    starts = {p: 0 for p in ends}
    while any(starts[p] < ends[p] for p in starts):
        ranges = [OffsetRange(topic, p, starts[p], min(ends[p], starts[p] + step)) for p in sorted(starts)]
        got = _records(read(ranges))
        assert [(p, o) for p, o, _ in got] == [(r.partition, o) for r in ranges for o in range(r.start, r.end)]
        seen += got
        starts = {r.partition: r.end for r in ranges}
        read_ahead()
    return seen


def test_ranges_read_with_records_read_ahead_between_them_hold_every_record_once(click_settings, producer):
    topic = click_settings.kafka.clicks_topic
    producer.send(600)
    ends = end_offsets(click_settings.kafka.bootstrap, topic)
    assert sum(ends.values()) == 600
    reader = AheadReader(click_settings.kafka.bootstrap, fetch_wait_ms=100, ahead_bytes=1 << 20, batch_rows=50)
    try:
        assert not reader.can_read_ahead(), "nothing assigned yet: nothing to read ahead of"
        seen = _walk(reader.read, lambda: [reader.read_ahead(0.2) for _ in range(3)], topic, ends, 45)
        assert len(seen) == len({(p, o) for p, o, _ in seen}) == 600
        assert reader.held_bytes == 0, "everything read ahead was handed out"
        fullest = max(ends, key=ends.get)
        again = _records(reader.read([OffsetRange(topic, fullest, 10, 30)]))  # a start elsewhere: assigned afresh
        assert [(p, o) for p, o, _ in again] == [(fullest, o) for o in range(10, 30)]
        assert [v for _, _, v in again] == [v for p, o, v in seen if p == fullest and 10 <= o < 30]
    finally:
        reader.close()


def test_read_ahead_stops_at_its_bound(click_settings, producer):
    topic = click_settings.kafka.clicks_topic
    producer.send(600)
    reader = AheadReader(click_settings.kafka.bootstrap, fetch_wait_ms=100, ahead_bytes=2_000, batch_rows=20)
    try:
        first = _records(reader.read([OffsetRange(topic, 0, 0, 1)]))
        assert [(p, o) for p, o, _ in first] == [(0, 0)]
        while reader.read_ahead(0.2):
            pass
        assert 2_000 <= reader.held_bytes < 2_000 + 20 * 600, "read until the bound was passed, then no more"
        assert not reader.can_read_ahead()
    finally:
        reader.close()


def test_a_range_ending_in_a_transaction_marker_completes(settings):
    """A transactional producer's commit marker takes the last offset: no record is there, the range still ends."""
    topic = f"txn_{uuid.uuid4().hex[:8]}"
    admin = admin_client(settings)  # kept: a client collected before its future resolves destroys it
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result()
    producer = Producer({"bootstrap.servers": settings.kafka.bootstrap, "transactional.id": f"test-{topic}"})
    producer.init_transactions(30)
    producer.begin_transaction()
    for i in range(5):
        producer.produce(topic, value=b'{"n": %d}' % i)
    producer.commit_transaction(30)
    # the commit returns once the coordinator logged it; the marker reaches the partition (and its last stable
    # offset moves past the records) just after
    deadline = time.monotonic() + 30
    while (end := end_offsets(settings.kafka.bootstrap, topic)[0]) < 6 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert end == 6, "five records and the commit marker"
    reader = AheadReader(settings.kafka.bootstrap, fetch_wait_ms=100, ahead_bytes=0, timeout_s=10)
    try:
        got = _records(reader.read([OffsetRange(topic, 0, 0, end)]))
        assert [o for _, o, _ in got] == list(range(5))
        assert _records(reader.read([OffsetRange(topic, 0, end, end)])) == []
    finally:
        reader.close()
