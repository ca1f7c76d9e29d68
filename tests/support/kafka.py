"""Reading a topic back in tests: every record, by explicit assignment."""

from __future__ import annotations

from confluent_kafka import Consumer, TopicPartition


def consume_all(settings, topic: str, partitions: int, idle_seconds: float = 3.0) -> list[bytes]:
    """Read every record of a topic by explicit assignment until the partitions go idle."""
    consumer = Consumer({"bootstrap.servers": settings.kafka.bootstrap, "group.id": "tests",
                         "enable.auto.commit": False, "enable.partition.eof": True, "log_level": 0})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    values, eof = [], set()
    import time

    last = time.monotonic()
    while len(eof) < partitions and time.monotonic() - last < idle_seconds:
        msg = consumer.poll(0.5)
        if msg is None:
            continue
        last = time.monotonic()
        if msg.error():
            eof.add(msg.partition())
            continue
        values.append(msg.value())
    consumer.close()
    return values

