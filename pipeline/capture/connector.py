"""Binlog capture: a consistent snapshot, then every row change, as Debezium envelopes.

Correctness rules (docs/cdc.md documents them):
- **Snapshot seam.** Tables are read inside ``START TRANSACTION WITH CONSISTENT
  SNAPSHOT`` opened while ``FLUSH TABLES WITH READ LOCK`` holds, and the binlog
  position is read under the same lock; streaming starts exactly there.
- **Position.** After the producer has flushed every change up to a transaction's
  commit, the end position of that commit (binlog file + pos) is written to the
  position topic. A restart resumes after the last such checkpoint. Changes published
  after it are published again: the same envelopes with the same source position,
  which the apply job collapses by position, so replays are harmless.
- **DDL.** DDL on a captured table is judged against the table's recorded schema
  (``pipeline.capture.ddl``): what the lake can follow (a new column, a wider type) is recorded in
  the schema history topic before any later change is published; anything else stops the
  capture, saying what happened and how to resume.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Iterator
from typing import Any

import pymysql
from confluent_kafka import Producer
from pymysqlreplication import BinLogStreamReader
from pymysqlreplication.event import (
    GtidEvent,
    HeartbeatLogEvent,
    MariadbGtidEvent,
    QueryEvent,
    RotateEvent,
    XidEvent,
)
from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent

from lakehouse import kafka_clients
from lakehouse.errors import Backoff, FatalError, TransientError
from lakehouse.settings import Settings, secret
from lakehouse.source_database import connect
from pipeline import metrics
from pipeline.capture import envelope as env
from pipeline.capture import gtid as gtids
from pipeline.capture.checkpoints import read_checkpoint
from pipeline.capture.ddl import DdlFollower, read_schemas, snapshot_records
from pipeline.capture.schema_history import SchemaRecord, latest, read_all
from pipeline.capture.snapshot_read import Image, open_consistent_read, server_images, table_rows

log = logging.getLogger(__name__)



class PositionLost(FatalError):
    """The source no longer has the binlog the checkpoint points into (purged, or another server)."""


#: MySQL/MariaDB's replication error; it covers other causes too (a second replica with our server_id, a packet
#: over max_allowed_packet), so the message decides whether the position itself is gone
SOURCE_POSITION_ERROR = 1236
POSITION_GONE = ("could not find first log file", "purged", "could not find next log",
                 "start replication from position >", "binary log index")


def position_lost(exc: BaseException) -> bool:
    """The source says the binlog the checkpoint points into is gone (a re-snapshot is the way on)."""
    if not isinstance(exc, pymysql.err.OperationalError) or not exc.args or exc.args[0] != SOURCE_POSITION_ERROR:
        return False
    message = str(exc.args[1] if len(exc.args) > 1 else "").lower()
    return any(words in message for words in POSITION_GONE)


class MissingTopics(FatalError):
    """A topic the capture writes to does not exist, and the settings do not let it create one."""


class BrokerUnacknowledged(TransientError):
    """Kafka did not confirm published changes in time (the broker is down or restarting)."""


def cdc_connection(settings: Settings, **extra):
    """A connection as the capture's user, to the captured database."""
    m = settings.mariadb
    return connect(settings, user=m.cdc_user, database=m.database,
                   password=secret(m.cdc_password, "mariadb.cdc_password"), **extra)


#: statements logged inside a transaction, not at its end: a checkpoint there would resume mid-transaction
INSIDE_A_TRANSACTION = ("BEGIN", "SAVEPOINT", "ROLLBACK TO", "RELEASE SAVEPOINT", "XA START", "XA END", "XA PREPARE")


def ends_transaction(statement: str) -> bool:
    """A binlog query event after which the source has no open transaction: COMMIT, XA COMMIT/ROLLBACK, and
    DDL (which commits implicitly); ``statement`` upper-cased, spaces collapsed."""
    return not statement.startswith(INSIDE_A_TRANSACTION)


class Capture:
    def __init__(self, settings: Settings, server_id: int = 91_001, checkpoint_seconds: float = 0.5,
                 accept_ddl: str | None = None):
        self.settings = settings
        self.db = settings.mariadb.database
        self.tables = list(settings.cdc_tables)
        self.server_id = server_id
        self.checkpoint_seconds = checkpoint_seconds
        self.producer = self._new_producer()
        self.failures: list = []
        self._published = 0
        self._counted: dict[tuple[str, str], Any] = {}  # CDC_EVENTS children: labels() per row was 4 % of a snapshot
        self._uncounted: dict[tuple[str, str], int] = {}  # published, not yet added to CDC_EVENTS
        self._topics: dict[str, str] = {}
        self.accept_ddl = accept_ddl
        with cdc_connection(settings) as conn, conn.cursor() as cur:
            cur.execute("SELECT VERSION()")
            self.connector = gtids.dialect(cur.fetchone()[0])
            now = read_schemas(cur, self.db, self.tables)
        # where the capture stands, the schema it last recorded (a DDL not yet streamed must not count)
        recorded = {t: r.schema for t, r in latest(read_all(settings)).items() if t in now}
        self.ddl = self._follower({**now, **recorded})

    def _follower(self, schemas) -> DdlFollower:
        return DdlFollower(self.db, schemas, self.publish_schema,
                           lambda table: self._read_schemas([table])[table], self.accept_ddl,
                           {t.source: t.table for t in self.settings.captured_tables})

    @property
    def keys(self) -> dict[str, tuple[str, ...]]:
        return {table: schema.key for table, schema in self.ddl.schemas.items()}

    def _read_schemas(self, tables: list[str]):
        with cdc_connection(self.settings) as conn, conn.cursor() as cur:
            return read_schemas(cur, self.db, tables)

    def publish_schema(self, record: SchemaRecord) -> None:
        """A schema record, acknowledged by Kafka before anything after it is published."""
        self.producer.produce(self.settings.cdc_schema_topic, record.to_json(), key=record.table.encode())
        if self.producer.flush(60):
            raise BrokerUnacknowledged(f"Kafka did not acknowledge the schema record of {record.table}")

    def _new_producer(self) -> Producer:
        # lz4: an envelope is ~450 bytes of JSON, mostly the same keys; a 10 M-row snapshot is ~4.5 GB without it
        # delivery reports for failures only: a Python callback per record was ~4 % of a snapshot (profiled);
        # the callback is the producer's own, not passed with each record (that was most of produce()'s cost)
        return kafka_clients.producer(self.settings.kafka.bootstrap, self.settings.kafka.producer_linger_ms,
                                      {"compression.type": "lz4", "delivery.report.only.error": True,
                                       "on_delivery": self._on_delivery})

    # -- publishing ---------------------------------------------------------------------
    def _on_delivery(self, err, _msg) -> None:
        if err is not None:
            self.failures.append(err)

    def publish(self, table: str, record: dict) -> None:
        row = record["after"] or record["before"]
        key = env.encode({k: row[k] for k in self.keys[table]})
        self._send(table, record["op"], key, env.encode(record))

    def _send(self, table: str, op: str, key: bytes, value: bytes) -> None:
        topic = self._topics.get(table)
        if topic is None:
            topic = self._topics[table] = self.settings.cdc_topic(table)
        while True:
            try:
                self.producer.produce(topic, value, key=key)
                break
            except BufferError:  # the local queue is full (a 10 M-row snapshot outruns the broker): let it drain
                self.producer.poll(0.5)
        self._published += 1
        self._uncounted[(table, op)] = self._uncounted.get((table, op), 0) + 1
        if self._published % 500 == 0:  # delivery reports and counters; per record they cost a snapshot ~15 %
            self.producer.poll(0)
            self._count()

    def _count(self) -> None:
        """Add what was published since the last call to the events counter (its children kept: labels() costs)."""
        for (table, op), n in self._uncounted.items():
            counter = self._counted.get((table, op))
            if counter is None:
                counter = self._counted[(table, op)] = metrics.CDC_EVENTS.labels(table, op)
            counter.inc(n)
        self._uncounted.clear()

    def checkpoint(self, position: dict) -> None:
        """Make everything published so far durable, then record the position after it."""
        self._count()
        if self.producer.flush(60) or self.failures:
            raise BrokerUnacknowledged(f"Kafka did not acknowledge changes ({self.failures[:1]}); not checkpointing")
        self.producer.produce(self.settings.cdc_position_topic, json.dumps(position).encode())
        if self.producer.flush(60):
            raise BrokerUnacknowledged("Kafka did not acknowledge the checkpoint")
        metrics.CDC_POSITION.labels(position["file"]).set(position["pos"])
        metrics.CDC_CHECKPOINTS.inc()

    # -- snapshot -------------------------------------------------------------------------
    def snapshot(self) -> dict:
        """Publish every row as op 'r' from one consistent read; return the position to stream from."""
        with cdc_connection(self.settings, conv=env.SNAPSHOT_CONVERSIONS) as conn, conn.cursor() as cur:
            file, pos, gtid_set = open_consistent_read(cur, gtids.snapshot_set_query(self.connector))
            schemas = read_schemas(cur, self.db, self.tables)  # no DDL can run under the snapshot's read lock
            for record in snapshot_records(schemas, file, pos):
                self.publish_schema(record)
            self.ddl = self._follower(schemas)
            ts_ms = int(time.time() * 1000)
            total = 0
            for t_index, table in enumerate(self.tables):
                envelopes = env.SnapshotEnvelopes(
                    [c.name for c in schemas[table].columns], self.keys[table], connector=self.connector,
                    name=self.settings.kafka.cdc_topic_prefix, db=self.db, table=table,
                    server_id=self.settings.mariadb.server_id, ts_ms=ts_ms, file=file, pos=pos)
                # the server builds each after-image, or (a column it would write otherwise) the capture does
                images: Iterator[Image] = server_images(conn, schemas[table]) or (
                    (values, None, last) for _, values, last in table_rows(conn, table, self.keys[table]))
                for values, image, last_of_table in images:
                    last = t_index == len(self.tables) - 1 and last_of_table
                    key, value = (envelopes.encode(values, total, last) if image is None
                                  else envelopes.encode_image(values, image, total, last))
                    self._send(table, "r", key, value)
                    total += 1
            cur.execute("COMMIT")
        position = {"file": file, "pos": pos, "snapshot_done": True, "gtid_set": gtid_set}
        self.checkpoint(position)
        log.info("snapshot: %d rows of %s at %s:%s", total, self.tables, file, pos)
        return position

    # -- streaming ------------------------------------------------------------------------
    def _reader(self, file: str, pos: int, heartbeat: float) -> BinLogStreamReader:
        m = self.settings.mariadb
        return BinLogStreamReader(
            connection_settings={"host": m.host, "port": m.port, "user": m.cdc_user,
                                 "password": secret(m.cdc_password, "mariadb.cdc_password")},
            # File + position works on both dialects (the is_mariadb path would ignore log_pos);
            # MariaDB GTID events still arrive (the library asks for slave capability 4).
            server_id=self.server_id, is_mariadb=False, blocking=True, resume_stream=True,
            log_file=file, log_pos=pos, slave_heartbeat=heartbeat,
            only_events=[RotateEvent, GtidEvent, MariadbGtidEvent, QueryEvent, XidEvent, HeartbeatLogEvent,
                         WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent],
        )

    def _advance(self, gtid_set: str | None, gtid: str | None) -> str | None:
        """The executed GTID set after the transaction ``gtid`` (None once it cannot be followed: it is a
        record for operators, never a reason to stop the capture; the position is file and offset)."""
        if gtid_set is None or gtid is None:
            return gtid_set
        try:
            return gtids.add(self.connector, gtid_set, gtid)
        except gtids.GtidFormatError as exc:
            log.warning("no longer recording the GTID set in checkpoints: %s", exc)
            return None

    def stream(self, position: dict, stop: threading.Event, heartbeat: float = 0.5) -> None:
        """Follow the binlog from a transaction boundary until stopped.

        One blocking replication connection; when the source is idle it sends a heartbeat
        every ``heartbeat`` seconds, which is when a stop request and a pending
        checkpoint are looked at. Changes arrive as soon as they are committed.
        """
        file, gtid_set = position["file"], position.get("gtid_set")
        pending, last_checkpoint = None, time.monotonic()
        last_durable = position  # what a DDL that stops the capture leaves the lake with
        reader = self._reader(file, position["pos"], heartbeat)
        gtid, order = None, 0

        def committed(pos: int) -> dict:
            """The position after a transaction's end; its GTID joins the set, and is not reused after it."""
            nonlocal gtid_set, gtid
            gtid_set, gtid = self._advance(gtid_set, gtid), None
            return {"file": file, "pos": pos, "snapshot_done": True, "gtid_set": gtid_set}

        try:
            for event in reader:
                metrics.set_ready("capture", True)  # following the binlog (a heartbeat when idle)
                if isinstance(event, RotateEvent):
                    file = event.next_binlog
                elif isinstance(event, (GtidEvent, MariadbGtidEvent)):
                    gtid, order = str(event.gtid), 0
                elif isinstance(event, XidEvent):
                    pending = committed(event.packet.log_pos)
                elif isinstance(event, QueryEvent):
                    query = event.query if isinstance(event.query, str) else event.query.decode(errors="replace")
                    statement = " ".join(query.split()).upper()
                    if statement != "BEGIN" and statement != "COMMIT":
                        if pending:  # everything before the statement, durable before it is judged
                            self.checkpoint(pending)
                            last_durable, pending, last_checkpoint = pending, None, time.monotonic()
                        self.ddl.statement(query, file, event.packet.log_pos, last_durable)
                    if ends_transaction(statement):
                        pending = committed(event.packet.log_pos)
                elif isinstance(event, (WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent)):
                    if event.schema == self.db and event.table in self.tables:
                        order = self._publish_rows(event, file, gtid, order)
                idle = isinstance(event, HeartbeatLogEvent)
                if pending and (idle or time.monotonic() - last_checkpoint >= self.checkpoint_seconds):
                    self.checkpoint(pending)
                    last_durable, pending, last_checkpoint = pending, None, time.monotonic()
                if stop.is_set() and pending is None:
                    break
        finally:
            reader.close()

    def _publish_rows(self, event, file: str, gtid: str | None, order: int) -> int:
        ts_ms = int(event.timestamp * 1000)
        metrics.CDC_SOURCE_LAG.set(max(0.0, time.time() - event.timestamp))
        for i, row in enumerate(event.rows):
            if isinstance(event, WriteRowsEvent):
                op, before, after = "c", None, row["values"]
            elif isinstance(event, UpdateRowsEvent):
                op, before, after = "u", row["before_values"], row["after_values"]
            else:
                op, before, after = "d", row["values"], None
            order += 1
            self.publish(event.table, env.envelope(
                op, before, after, connector=self.connector, name=self.settings.kafka.cdc_topic_prefix,
                db=event.schema, table=event.table, server_id=event.packet.server_id, ts_ms=ts_ms, gtid=gtid,
                file=file, pos=event.packet.log_pos, row=i, txn_order=order))
        return order

    def run(self, stop: threading.Event, max_backoff: float = 30.0) -> None:
        """Snapshot if no complete snapshot was recorded, then stream from the checkpoint.

        As every job (``lakehouse.errors.Backoff``), it stops only on a ``FatalError``: DDL it cannot
        follow, a position the source no longer has. Anything else (a lost source or broker
        connection) is retried: after a growing pause the capture starts over from the last durable
        checkpoint (replayed changes are harmless, see
        *Position* above), so a restart of MariaDB or Kafka needs no human.
        """
        self.ensure_topics()
        for attempt in Backoff(stop, self._interrupted, longest=max_backoff):
            with attempt:
                try:
                    self._resume(stop)
                except Exception as exc:
                    if position_lost(exc):
                        raise PositionLost(
                            f"the source cannot stream from the last checkpoint ({exc.args[1] if len(exc.args) > 1 else exc}): "
                            "its binlog was purged past it, or this is another server. Changes since are unknown here; "
                            "re-snapshot: delete the position topic "
                            f"{self.settings.cdc_position_topic} and restart the capture") from exc
                    raise

    def _interrupted(self, exc: BaseException, pause: float) -> None:
        """Before the pause of a retry: say why, and start over from the last checkpoint with a fresh producer."""
        metrics.set_ready("capture", False)
        log.error("capture interrupted (%s: %s); resuming from the last checkpoint in %.0fs",
                  type(exc).__name__, str(exc).splitlines()[0][:200] if str(exc) else "", pause)
        self.failures.clear()
        # A fresh producer: what the old one still held is purged (the capture resumes from its
        # last checkpoint and sends it again, once), and a producer id a restarted broker fenced is gone.
        self.producer.purge()
        self.producer = self._new_producer()

    def ensure_topics(self) -> None:
        """The position topic and one topic per captured table: created (``kafka.create_topics``) or a FatalError.

        Without it, a capture pointed at a database whose topics do not exist looped for good on
        ``_UNKNOWN_PARTITION … Failed to get watermark offsets`` instead of saying what was wrong.
        """
        s = self.settings
        needed = {s.cdc_position_topic: 1, s.cdc_schema_topic: 1,
                  **{s.cdc_topic(t): s.kafka.cdc_partitions for t in self.tables}}
        client = kafka_clients.admin(s.kafka.bootstrap)
        if s.kafka.create_topics:
            created = kafka_clients.create_topics(client, needed, s.topic_configs())
            if created:
                log.info("created the topics %s", ", ".join(created))
            return
        missing = kafka_clients.missing_topics(client, list(needed))
        if missing:
            raise MissingTopics(
                f"the capture's topics {', '.join(missing)} do not exist on {s.kafka.bootstrap}. Create them: "
                "`lakehouse stack up` creates every topic the settings name (on Kubernetes, `make k8s-generate` "
                "writes them as KafkaTopic resources), or let the capture create them: "
                "LAKEHOUSE_KAFKA__CREATE_TOPICS=true")

    def _resume(self, stop: threading.Event) -> None:
        position = read_checkpoint(self.settings)
        if position is None or not position.get("snapshot_done"):
            position = self.snapshot()
        else:
            log.info("resuming the binlog at %s:%s", position["file"], position["pos"])
        self.stream(position, stop)
