"""Produce/consume throughput of the local broker: durable S3 engine vs the memory engine.

Decides the default of ``kafka.storage``: the figures show what durability costs.
The S3 figure comes from the stack's own broker; the memory figure from a temporary
Tansu started here on a free loopback port and stopped at the end.
"""

from __future__ import annotations

import socket
import subprocess
import time
import uuid
from dataclasses import dataclass

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from deploy.local.binaries import tool
from lakehouse.settings import LOOPBACK, Settings


@dataclass
class BrokerFigures:
    engine: str
    messages: int
    produce_per_s: float
    consume_per_s: float


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind((LOOPBACK, 0))
        return sock.getsockname()[1]


def measure(bootstrap: str, engine: str, messages: int, partitions: int = 3) -> BrokerFigures:
    topic = f"broker-bench-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result()
    payload = b'{"webpageId":42,"uid":"513248","productId":"7","cookieId":"abcdefghijklmno","expendTime":9,' \
              b'"updateTime":1700000000000,"eventId":"0123456789abcdef0123456789abcdef","pad":"' + b"x" * 40 + b'"}'
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.num.messages": 10_000,
                         "queue.buffering.max.messages": 1_000_000, "log_level": 0})
    began = time.monotonic()
    for _ in range(messages):
        try:
            producer.produce(topic, payload)
        except BufferError:
            producer.poll(0.05)
            producer.produce(topic, payload)
    producer.flush(120)
    produce_s = time.monotonic() - began
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench", "enable.partition.eof": True,
                         "enable.auto.commit": False, "log_level": 0})
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
    port = _free_port()
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
