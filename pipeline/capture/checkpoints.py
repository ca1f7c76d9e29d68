"""Where the capture stands: its last durable binlog position, read back from the position topic.

The capture appends a checkpoint (binlog file, position, GTID set) to ``cdc.<prefix>._position``
after everything before it is acknowledged by Kafka; a restart resumes from the newest one.
Read by the capture itself and by whoever waits for its first snapshot (benchmarks, tests).
"""

from __future__ import annotations

import json
import time

from confluent_kafka import KafkaError, KafkaException, TopicPartition

from lakehouse import kafka_clients
from lakehouse.errors import TransientError
from lakehouse.settings import Settings


class PositionUnreadable(TransientError):
    """The position topic has checkpoints but the broker did not hand them over in time."""


def _position_topic_ends(consumer, tp: TopicPartition, timeout_s: float = 15.0) -> tuple[int, int]:
    """The position topic's (low, high) offsets; (-1, -1) when it does not exist. A partition whose leader is
    being elected (just created, a broker restart) is asked again; an unreachable broker raises: it is NOT
    a reason to snapshot again (deletes made since would be lost)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return consumer.get_watermark_offsets(tp, timeout=10, cached=False)
        except KafkaException as exc:
            if exc.args[0].code() in (KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_TOPIC):
                return -1, -1
            if not kafka_clients.retriable(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def read_checkpoint(settings: Settings) -> dict | None:
    """The last durable position, read back from the tail of the position topic."""
    consumer = kafka_clients.reader(settings.kafka.bootstrap, "cdc-position")
    try:
        tp = TopicPartition(settings.cdc_position_topic, 0)
        low, high = _position_topic_ends(consumer, tp)
        if low < 0:
            return None  # no position topic yet: nothing was ever captured
        if high <= low:
            return None  # nothing ever checkpointed
        values = kafka_clients.read_values(consumer, tp.topic, max(low, high - 50), high, 15)
        last = json.loads(values[-1]) if values else None
        if last is None:
            raise PositionUnreadable(f"{tp.topic} holds checkpoints {low}..{high - 1} but none could be read "
                                     f"within 15s (broker restarting?)")
        return last
    finally:
        consumer.close()
