"""DDL met in the binlog on a captured table: followed, recorded, or the capture stops with a decision to make.

The capture hands every statement that is not a transaction boundary to ``DdlFollower.statement``.
For DDL on a captured table it reads the table's columns again (``information_schema``) and
compares them with the schema it last recorded (``pipeline.capture.source_schema.classify``):

- what the lake can follow (a new column, a wider type, a change the lake's type absorbs) is
  recorded in the schema history topic, acknowledged before any later change is published,
  logged and counted (``lakehouse_cdc_schema_changes_total``);
- what it cannot (a column dropped or renamed, a narrower type, a new key, ``TRUNCATE``) stops
  the capture with a ``SchemaChangeError`` that says what happened, what the lake holds, and the
  command that resumes once someone has decided: ``lakehouse run cdc --accept-ddl FILE:POS``
  records the new schema and carries on (the lake keeps a dropped column, null from then on; it
  keeps the wider type of a narrowed one), or a new snapshot rebuilds the tables from the source.

The columns are read when the capture reaches the DDL, not as of the DDL: if another DDL on
the same table followed before the capture got there, both are judged together.
"""

from __future__ import annotations

import logging
import re
import time

from lakehouse.errors import FatalError
from pipeline import metrics
from pipeline.capture.schema_history import SchemaRecord
from pipeline.capture.source_schema import Follow, SourceSchema, classify, read_source_schema

log = logging.getLogger(__name__)

_DDL = re.compile(r"\b(ALTER|DROP|RENAME|TRUNCATE)\s+TABLE\s+(IF\s+EXISTS\s+)?(`?(?P<db>\w+)`?\.)?`?(?P<table>\w+)`?",
                  re.IGNORECASE)


class SchemaChangeError(FatalError):
    """DDL on a captured table that the capture cannot follow safely."""


class DdlFollower:
    """The captured tables' current schemas, and what to do with DDL on them.

    ``publish(record)`` must make a schema record durable before returning (the capture's
    producer, flushed); ``read_schema(table)`` reads a table's columns now; ``accept`` is the
    binlog position (``file:pos``) of a DDL an operator accepted with ``--accept-ddl``.
    """

    def __init__(self, database: str, schemas: dict[str, SourceSchema], publish, read_schema,
                 accept: str | None = None, lake_tables: dict[str, str] | None = None):
        self.database, self.schemas = database, dict(schemas)
        self.publish, self.read_schema, self.accept = publish, read_schema, accept
        self.lake_tables = lake_tables or {}

    def statement(self, query: str, file: str, pos: int, checkpoint: dict | None) -> None:
        """Judge one binlog statement (ending at ``file:pos``); ``checkpoint`` is the capture's last durable one."""
        text = " ".join(query.split())
        match = _DDL.search(text)
        if not match or match.group("table") not in self.schemas:
            return
        if match.group("db") and match.group("db") != self.database:
            return
        table = match.group("table")
        at = f"{file}:{pos}"
        if match.group(1).upper() in ("DROP", "RENAME", "TRUNCATE"):
            self._stop(table, text, at, [f"{match.group(1).upper()} TABLE"], checkpoint, acceptable=False)
            return
        after = self.read_schema(table)
        changes = classify(self.schemas[table], after)
        stops = [str(c) for c in changes if c.follow == Follow.STOP]
        if stops and self.accept != at:
            self._stop(table, text, at, stops, checkpoint, acceptable=True)
        self.publish(SchemaRecord(after, file, pos, "ddl", text, int(time.time() * 1000)))
        self.schemas[table] = after
        for change in changes:
            metrics.CDC_SCHEMA_CHANGES.labels(table, change.follow.value).inc()
            log.warning("schema change on %s.%s (%s): %s", self.database, table, change.follow.value, change)
        if not changes:
            log.info("DDL on %s.%s changes no column: %s", self.database, table, text)

    def _stop(self, table: str, text: str, at: str, what: list[str], checkpoint: dict | None, acceptable: bool):
        held = (f"{checkpoint['file']}:{checkpoint['pos']}" if checkpoint else "the snapshot")
        lake = self.lake_tables.get(table, "its Iceberg table")
        resume = (f"Once decided, either accept it: `lakehouse run cdc --accept-ddl {at}` (the lake keeps what it "
                  "has: a dropped column stays, null from then on; a narrowed column keeps its wider type), or "
                  if acceptable else "Once decided, ")
        raise SchemaChangeError(
            f"DDL on captured table {self.database}.{table} stops the capture at binlog {at}: {text!r} "
            f"({'; '.join(what)}). The lake ({lake}) holds every change up to binlog {held}; nothing after the "
            f"DDL is published, nothing is lost. {resume}rebuild from the source: delete the position topic and "
            "start the capture again (a new snapshot).")


def snapshot_records(schemas: dict[str, SourceSchema], file: str, pos: int) -> list[SchemaRecord]:
    """The records a snapshot publishes: each table's schema as read inside the snapshot."""
    now = int(time.time() * 1000)
    return [SchemaRecord(schema, file, pos, "snapshot", "", now) for schema in schemas.values()]


def read_schemas(cur, database: str, tables: list[str]) -> dict[str, SourceSchema]:
    """Each table's schema now (a pymysql cursor); a table without a primary key is refused."""
    schemas = {table: read_source_schema(cur, database, table) for table in tables}
    for table, schema in schemas.items():
        if not schema.columns:
            raise SchemaChangeError(f"{database}.{table} does not exist: it is named in the CDC settings "
                                    "(cdc.extra_tables); create it, or remove it from the settings")
        if not schema.key:
            raise SchemaChangeError(f"{database}.{table} has no primary key: CDC needs one to key its changes")
    return schemas
