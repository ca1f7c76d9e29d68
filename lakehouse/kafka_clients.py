"""Every Kafka client the project makes, configured in one place.

Three kinds, each set up the way the product relies on:

- ``reader``: a consumer that is only ever *assigned* partitions at explicit offsets. It never
  joins a group and never commits (the offsets live in the Iceberg tables, in the same
  snapshot as the rows), it reports the end of each partition so a bounded range read knows
  when it is done, and an offset the broker no longer has is an error, never a silent jump.
- ``producer``: idempotent, so a retry after a lost acknowledgement never writes a record
  twice; the caller chooses how long it lingers to batch (latency against broker requests).
- ``admin``: topics, partitions and topic ids.

librdkafka logs to stderr by itself. ``ERRORS`` (3) is the default level: what goes wrong
still reaches the job's log, while ``SILENT`` (0) is for probes that expect the broker to be
away (readiness checks, the chaos suite's fault windows) and learn it from the API instead.
"""

from __future__ import annotations

import time
from typing import Any

from confluent_kafka import Consumer, IsolationLevel, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

from lakehouse.errors import LakehouseError

ERRORS = 3
SILENT = 0


def reader(bootstrap: str, purpose: str, extra: dict[str, Any] | None = None, log_level: int = ERRORS) -> Consumer:
    """An assign-only consumer; ``purpose`` names it in the broker's logs (``lakehouse-<purpose>``)."""
    return Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": f"lakehouse-{purpose}",  # required by librdkafka; never joined, nothing committed
        "enable.auto.commit": False,
        "enable.partition.eof": True,
        "auto.offset.reset": "error",
        "log_level": log_level,
        **(extra or {}),
    })


def read_values(consumer: Consumer, topic: str, start: int, end: int, timeout_s: float) -> list[bytes]:
    """The values at offsets ``start`` up to ``end`` of partition 0 of ``topic`` (fewer if its end comes first, or
    ``timeout_s`` runs out: the caller says what that means). For the small logs the CDC capture keeps."""
    consumer.assign([TopicPartition(topic, 0, start)])
    values: list[bytes] = []
    deadline = time.monotonic() + timeout_s
    while start + len(values) < end and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is None:
            continue
        if (error := msg.error()) is not None:
            if error.code() == KafkaError._PARTITION_EOF:
                break
            continue
        values.append(msg.value() or b"")
    return values


def producer(bootstrap: str, linger_ms: int, extra: dict[str, Any] | None = None, log_level: int = ERRORS) -> Producer:
    """An idempotent producer that waits up to ``linger_ms`` to fill a batch."""
    return Producer({
        "bootstrap.servers": bootstrap,
        "enable.idempotence": True,  # retries never write twice
        "linger.ms": linger_ms,
        "log_level": log_level,
        **(extra or {}),
    })


def admin(bootstrap: str, extra: dict[str, Any] | None = None, log_level: int = ERRORS) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap, "log_level": log_level, **(extra or {})})


#: errors that pass by themselves: a partition whose leader is being elected (just after its topic was created,
#: or its broker restarted), a request that timed out. librdkafka flags only some errors ``retriable()`` (those
#: of its transactional API), so the codes decide.
PASSING = frozenset({KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE,
                     KafkaError.UNKNOWN_LEADER_EPOCH, KafkaError.FENCED_LEADER_EPOCH, KafkaError.OFFSET_NOT_AVAILABLE,
                     KafkaError.REQUEST_TIMED_OUT, KafkaError._TRANSPORT, KafkaError._TIMED_OUT})


def retriable(exc: KafkaException) -> bool:
    """An error that will pass: worth asking again shortly, never a reason to give up."""
    error = exc.args[0] if exc.args else None
    return isinstance(error, KafkaError) and (error.retriable() or error.code() in PASSING)


def list_offsets(client: AdminClient, partitions: list[tuple[str, int]], spec: OffsetSpec,
                 timeout_s: float = 10.0) -> dict[tuple[str, int], int]:
    """Each partition's offset of ``spec`` (read-committed), asked again while Kafka answers a retriable error."""
    deadline = time.monotonic() + timeout_s
    while True:
        request = {TopicPartition(topic, part): spec for topic, part in partitions}
        futures = client.list_offsets(request, isolation_level=IsolationLevel.READ_COMMITTED,
                                      request_timeout=timeout_s)
        try:
            return {(tp.topic, tp.partition): future.result().offset for tp, future in futures.items()}
        except KafkaException as exc:
            if not retriable(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def missing_topics(client: AdminClient, topics: list[str], timeout_s: float = 10.0) -> list[str]:
    """Those of ``topics`` the broker does not have."""
    existing = client.list_topics(timeout=timeout_s).topics
    return [t for t in topics if t not in existing]


def create_topics(client: AdminClient, partitions: dict[str, int], configs: dict[str, dict[str, int]]) -> list[str]:
    """Create those of ``partitions`` (topic -> partition count) that are missing, with their ``configs``;
    wait until every one of them has a leader. Returns the topics created."""
    new = [NewTopic(name, num_partitions=n, replication_factor=1,
                    config={k: str(v) for k, v in configs.get(name, {}).items()})
           for name, n in partitions.items() if name in missing_topics(client, list(partitions))]
    for _name, future in (client.create_topics(new, request_timeout=15).items() if new else ()):
        try:
            future.result()
        except KafkaException as exc:
            if "TOPIC_ALREADY_EXISTS" not in str(exc):
                raise
    # a topic just created has no leader for a moment: whoever asks for its offsets then is told
    # NOT_LEADER_FOR_PARTITION; so return only once every topic can be read
    wait_for_leaders(client, list(partitions))
    return [t.topic for t in new]


def wait_for_leaders(client: AdminClient, topics: list[str], timeout_s: float = 30.0) -> None:
    """Return once every partition of ``topics`` has a leader (a topic just created has none for a moment)."""
    deadline = time.monotonic() + timeout_s
    while True:
        meta = client.list_topics(timeout=timeout_s)
        waiting = [t for t in topics if t not in meta.topics or meta.topics[t].error is not None
                   or any(p.leader < 0 for p in meta.topics[t].partitions.values())]
        if not waiting:
            return
        if time.monotonic() > deadline:
            raise LakehouseError(f"topics {waiting} have partitions without a leader after {timeout_s:.0f} s")
        time.sleep(0.1)


def end_offsets(bootstrap: str, topic: str, timeout_s: float = 10.0) -> dict[int, int]:
    """Each partition's end (its last stable offset, read-committed): how far the topic's log reaches now."""
    client = admin(bootstrap)
    meta = client.list_topics(topic, timeout=timeout_s)
    if topic not in meta.topics or meta.topics[topic].error is not None:
        raise LakehouseError(f"topic {topic!r} does not exist on {bootstrap}")
    ends = list_offsets(client, [(topic, p) for p in meta.topics[topic].partitions], OffsetSpec.latest(), timeout_s)
    return {part: offset for (_, part), offset in ends.items()}


def records_in_topic(bootstrap: str, topic: str) -> int:
    """Records a topic holds so far (the sum of its partitions' ends): what really reached Kafka."""
    return sum(end_offsets(bootstrap, topic).values())
