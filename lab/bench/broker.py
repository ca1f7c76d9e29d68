"""Produce/consume throughput of the local broker: durable S3 engine vs the memory engine.

Decides the default of ``kafka.storage``: the figures show what durability costs.
The S3 figure comes from the stack's own broker; the memory figure from a temporary
Tansu started here on a free loopback port and stopped at the end.
"""

from __future__ import annotations

import subprocess
import time
import uuid
from dataclasses import dataclass

from confluent_kafka import KafkaError, TopicPartition
from confluent_kafka.admin import NewTopic

from deploy.local.binaries import tool
from deploy.local.processes import free_port
from lakehouse import kafka_clients
from lakehouse.settings import LOOPBACK, Settings


@dataclass
class BrokerFigures:
    engine: str
    messages: int
    produce_per_s: float
    consume_per_s: float


def measure(bootstrap: str, engine: str, messages: int, partitions: int = 3) -> BrokerFigures:
    topic = f"broker-bench-{uuid.uuid4().hex[:8]}"
    admin = kafka_clients.admin(bootstrap, log_level=kafka_clients.SILENT)
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result()
    payload = b'{"webpageId":42,"uid":"513248","productId":"7","cookieId":"abcdefghijklmno","expendTime":9,' \
              b'"updateTime":1700000000000,"eventId":"0123456789abcdef0123456789abcdef","pad":"' + b"x" * 40 + b'"}'
    producer = kafka_clients.producer(bootstrap, 5, {"batch.num.messages": 10_000,
                                                     "queue.buffering.max.messages": 1_000_000},
                                      log_level=kafka_clients.SILENT)
    began = time.monotonic()
    for _ in range(messages):
        try:
            producer.produce(topic, payload)
        except BufferError:
            producer.poll(0.05)
            producer.produce(topic, payload)
    producer.flush(120)
    produce_s = time.monotonic() - began
    consumer = kafka_clients.reader(bootstrap, "bench", log_level=kafka_clients.SILENT)
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got, eof, began = 0, set(), time.monotonic()
    while len(eof) < partitions and time.monotonic() - began < 120:
        for msg in consumer.consume(10_000, timeout=1.0):
            if msg.error():
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    eof.add(msg.partition())
                continue
            got += 1
    consume_s = time.monotonic() - began
    consumer.close()
    if got != messages:
        raise RuntimeError(f"{engine}: consumed {got} of {messages} messages")
    return BrokerFigures(engine, messages, messages / produce_s, messages / consume_s)


def compare(settings: Settings, messages: int = 200_000) -> list[BrokerFigures]:
    figures = [measure(settings.kafka.bootstrap, settings.kafka.storage, messages)]
    port = free_port(LOOPBACK)
    url = f"tcp://{LOOPBACK}:{port}"
    proc = subprocess.Popen([str(tool(settings.tools_dir, "tansu")), "broker", "--listener-url", url,
                             "--advertised-listener-url", url, "--storage-engine", "memory://tansu/"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(0.5)
        figures.append(measure(f"{LOOPBACK}:{port}", "memory", messages))
    finally:
        proc.terminate()
        proc.wait(10)
    return figures


@dataclass
class TailFetch:
    batches: int  # producer batches stored in the partition (one object each on the S3 engine)
    fetch_s: float  # first record of a fetch at the partition's last offset


def tail_fetch_seconds(bootstrap: str, topic: str, offset: int, timeout: float = 60.0) -> float:
    """Seconds until a fresh consumer's fetch at ``offset`` returns a record (``timeout`` if none)."""
    consumer = kafka_clients.reader(bootstrap, "bench", log_level=kafka_clients.SILENT)
    began = time.monotonic()
    try:
        consumer.assign([TopicPartition(topic, 0, offset)])
        while time.monotonic() - began < timeout:
            msg = consumer.poll(0.1)
            if msg is not None and msg.error() is None:
                break
        return time.monotonic() - began
    finally:
        consumer.close()


def fetch_cost_by_size(bootstrap: str, checkpoints: tuple[int, ...] = (500, 1000, 2000, 4000, 8000),
                       per_batch: int = 10, progress=print) -> list[TailFetch]:
    """How a fetch at the tail slows as a partition stores more producer batches.

    Why it matters: Tansu's S3 engine keeps each batch as one object and lists all of a
    partition's objects on every fetch, so the cost of reading new data grows with the
    topic's history, not with the data read. This is what ``kafka.producer_linger_ms``
    (fewer, larger batches) and the planner's ListOffsets fallback are for.
    """
    topic = f"broker-growth-{uuid.uuid4().hex[:8]}"
    admin = kafka_clients.admin(bootstrap, log_level=kafka_clients.SILENT)  # kept alive until the topic exists
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result()
    producer = kafka_clients.producer(bootstrap, 1000, {"batch.num.messages": per_batch}, log_level=kafka_clients.SILENT)
    figures, stored = [], 0
    for target in sorted(checkpoints):
        while stored < target:  # one flushed batch of `per_batch` records at a time
            for _ in range(per_batch):
                producer.produce(topic, b"x" * 200, partition=0)
            producer.flush(60)
            stored += 1
        figures.append(TailFetch(stored, tail_fetch_seconds(bootstrap, topic, stored * per_batch - 1)))
        progress(f"{stored:,} batches stored: tail fetch {figures[-1].fetch_s:.2f}s")
    return figures
