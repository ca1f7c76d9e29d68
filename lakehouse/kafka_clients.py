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

from typing import Any

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient

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
