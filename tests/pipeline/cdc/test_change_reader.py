"""The CDC apply's reader on the real broker: change records decoded ahead in a child process, the same
rows as decoding them in the apply's own process, and a record the apply cannot interpret stops it with
the record's place and what is wrong."""

from __future__ import annotations

import functools
import uuid

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import NewTopic

from deploy.local.services.broker import admin_client
from lakehouse.errors import FatalError
from pipeline.cdc import envelope as env
from pipeline.cdc.change_reader import change_reader
from pipeline.cdc.changes import EnvelopeError, parse_changes
from pipeline.kafka_source.ahead_reader import AheadReader
from pipeline.kafka_source.ranges import OffsetRange

SOURCE = dict(connector="mariadb", name="cdc.shop", db="shop", server_id=1, ts_ms=1_700_000_000_000, gtid=None)


@pytest.fixture
def change_topic(settings):
    """A topic of 40 changes of members 0-39, then one record with an unknown op (offset 40), then 5 more."""
    topic = f"cdc_{uuid.uuid4().hex[:8]}"
    admin = admin_client(settings)  # kept: a client collected before its future resolves destroys it
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result()
    producer = Producer({"bootstrap.servers": settings.kafka.bootstrap})
    for i in range(46):
        record = env.envelope("c", None, {"memberId": i, "level": "gold"}, table="user_member", file="binlog.000001",
                              pos=100 + i, row=0, **SOURCE)
        if i == 40:
            record["op"] = "x"
        producer.produce(topic, value=env.encode(record))
    assert producer.flush(30) == 0
    return topic


def _rows(batches) -> list[tuple]:
    out = []
    for batch in batches:
        out += zip(*(batch.column(c).to_pylist() for c in ("offset", "op", "pk", "order_key")), strict=True)
    return out


def test_the_reader_process_decodes_what_the_apply_would_and_stops_at_a_bad_record(settings, change_topic):
    keys = {change_topic: "memberId"}
    child = change_reader(settings.kafka.bootstrap, keys, fetch_wait_ms=100, ahead_mb=1)
    local = AheadReader(settings.kafka.bootstrap, fetch_wait_ms=100, ahead_bytes=0,
                        transform=functools.partial(parse_changes, keys=keys))
    try:
        good = [OffsetRange(change_topic, 0, 0, 25), OffsetRange(change_topic, 0, 25, 40)]
        seen = [_rows(child.read([r])) for r in good]
        assert seen == [_rows(local.read([r])) for r in good], "the same rows, decoded in either process"
        assert [row[:3] for part in seen for row in part] == [(i, "c", str(i)) for i in range(40)]
        with pytest.raises(FatalError, match=rf"{change_topic}\[0\]@40: unknown op 'x'"):
            list(child.read([OffsetRange(change_topic, 0, 40, 46)]))
        with pytest.raises(EnvelopeError, match=rf"{change_topic}\[0\]@40: unknown op 'x'"):
            list(local.read([OffsetRange(change_topic, 0, 40, 46)]))
        first = child.pid
        assert [row[0] for row in _rows(child.read([OffsetRange(change_topic, 0, 41, 46)]))] == list(range(41, 46))
        assert child.pid == first, "a bad record is an answer, not a crash: the same child reads on"
    finally:
        child.close()
        local.close()
