"""The captured tables' schemas over time: one record per table at the snapshot and after each DDL it follows.

Kept in the topic ``<prefix>._schema`` (one partition, kept for good, like the changes), so the
apply job learns a table's columns and their source types from the capture alone: it creates a
table's Iceberg table from the first record and follows the later ones (a new column, a wider
type). A record is acknowledged by Kafka before any change after its DDL is published, so a
change never arrives before the schema that describes it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from confluent_kafka import KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from lakehouse import kafka_clients
from lakehouse.errors import LakehouseError, TransientError
from lakehouse.settings import Settings
from pipeline.capture.source_schema import SourceSchema


class SchemaUnreadable(TransientError):
    """The schema topic could not be read to its end in time (a broker restarting)."""


@dataclass(frozen=True)
class SchemaRecord:
    schema: SourceSchema
    file: str  # binlog position the schema holds from
    pos: int
    reason: str  # "snapshot" or "ddl"
    statement: str = ""  # the DDL, for "ddl"
    ts_ms: int = 0

    @property
    def table(self) -> str:
        return self.schema.table

    def to_json(self) -> bytes:
        return json.dumps({"schema": json.loads(self.schema.to_json()), "file": self.file, "pos": self.pos,
                           "reason": self.reason, "statement": self.statement, "ts_ms": self.ts_ms}).encode()

    @classmethod
    def from_json(cls, value: bytes) -> SchemaRecord:
        data = json.loads(value)
        return cls(SourceSchema.from_json(json.dumps(data["schema"])), data["file"], int(data["pos"]), data["reason"],
                   data.get("statement", ""), int(data.get("ts_ms", 0)))


def read_all(settings: Settings, timeout_s: float = 15.0) -> list[SchemaRecord]:
    """Every schema record, oldest first (an empty list when the topic is empty or missing)."""
    consumer = kafka_clients.reader(settings.kafka.bootstrap, "cdc-schema")
    try:
        tp = TopicPartition(settings.cdc_schema_topic, 0)
        try:
            low, high = consumer.get_watermark_offsets(tp, timeout=10, cached=False)
        except Exception:  # noqa: BLE001 - no topic yet: nothing was ever captured
            return []
        if high <= low:
            return []
        values = kafka_clients.read_values(consumer, tp.topic, low, high, timeout_s)
        if len(values) < high - low:
            raise SchemaUnreadable(f"{tp.topic}: read {len(values)} of {high - low} schema records in "
                                   f"{timeout_s:.0f}s (broker restarting?)")
        return [SchemaRecord.from_json(value) for value in values]
    finally:
        consumer.close()


def latest(records: list[SchemaRecord]) -> dict[str, SchemaRecord]:
    """The newest record per table."""
    out: dict[str, SchemaRecord] = {}
    for record in records:
        out[record.table] = record
    return out


class SchemaWatch:
    """The newest schema record per table, read again only when the topic has grown (one offset request a batch)."""

    def __init__(self, settings: Settings):
        self.settings = settings
        self._seen = -1
        self._latest: dict[str, SchemaRecord] = {}
        self._admin: AdminClient | None = None  # kept once the topic exists: a new client each batch was ~50 ms of every batch

    def latest(self) -> dict[str, SchemaRecord]:
        topic = self.settings.cdc_schema_topic
        try:
            if self._admin is not None:
                try:
                    end = kafka_clients.list_offsets(self._admin, [(topic, 0)], OffsetSpec.latest())[(topic, 0)]
                except KafkaException:  # e.g. FENCED_LEADER_EPOCH after a broker restart: its metadata is stale,
                    self._admin = None  # and kept, it failed every batch after (the chaos suite); a new one below
            if self._admin is None:
                end = kafka_clients.end_offsets(self.settings.kafka.bootstrap, topic).get(0, 0)
                self._admin = kafka_clients.admin(self.settings.kafka.bootstrap, log_level=kafka_clients.SILENT)
        except LakehouseError:  # no schema topic yet: a capture older than it, or not started
            return self._latest
        if end != self._seen:
            self._latest, self._seen = latest(read_all(self.settings)), end
        return self._latest
