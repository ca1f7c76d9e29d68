"""Seed 004's Flink upsert sink as a CDC peer: its tables, its job's settings, its process, how far it applied.

The job itself (``flink_cdc_job.py``) runs in the Flink peer's environment; this side, in the
project's, prepares what it needs from the project's settings:

- the dimension tables, exactly as the apply declares them (``pipeline.cdc.dimension_tables``: the
  key is the identifier field the upsert's equality deletes name), with ``write.upsert.enabled``;
- each change topic's Flink columns, read as the source names them and cast to the table's types;
- the job's JSON file: broker, catalog, checkpoint interval, parallelism, checkpoint folder.

Flink commits its source's offsets to the broker (its consumer group) when a checkpoint
completes, the same moment its Iceberg sink commits that checkpoint's files: the benchmark
reads how far the peer applied from the group, since the sink records a checkpoint id in the
table's snapshots, not offsets.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from confluent_kafka import KafkaError, KafkaException, TopicPartition
from pyiceberg.types import DecimalType, IcebergType, IntegerType, StringType, TimestamptzType
from tenacity import Retrying, retry_if_exception, stop_after_delay, wait_exponential

from lab.peers import flink_cdc_job, flink_setup
from lakehouse.catalog import pyiceberg_catalog
from lakehouse.errors import LakehouseError
from lakehouse.kafka_clients import end_offsets, reader
from lakehouse.settings import Settings
from pipeline.cdc.dimension_tables import dimensions, ensure_dimension_tables

#: what the Iceberg sink reads to write upserts by default (the job also asks for them per insert)
UPSERT_PROPERTIES = {"write.upsert.enabled": "true"}


def _flink_type(kind: IcebergType, source: bool) -> str:
    if isinstance(kind, StringType):
        return "STRING"
    if isinstance(kind, IntegerType):
        return "INT"
    if isinstance(kind, DecimalType):
        return f"DECIMAL({kind.precision}, {kind.scale})"
    if isinstance(kind, TimestamptzType):  # the capture writes milliseconds; the table holds microseconds
        return "TIMESTAMP_LTZ(3)" if source else "TIMESTAMP_LTZ(6)"
    raise LakehouseError(f"the Flink CDC peer has no Flink type for {kind}")


def sources(s: Settings) -> list[dict]:
    """Each seed table's change topic: its Flink columns (source names) and the select that casts them."""
    declared = dimensions(s)
    out = []
    for captured in s.captured_tables:
        dimension = declared.get(captured.source)
        if dimension is None:  # cdc.extra_tables: their schema is known only from the capture's record
            continue
        back = {lake: source for source, lake in captured.renames.items()}
        columns, select = {}, []
        for field in dimension.schema.fields:
            name = back.get(field.name, field.name)
            columns[name] = _flink_type(field.field_type, source=True)
            target = _flink_type(field.field_type, source=False)
            select.append(f"CAST(`{name}` AS {target})" if target != columns[name] else f"`{name}`")
        out.append({"topic": s.cdc_topic(captured.source), "table": dimension.table, "columns": columns,
                    "select": select})
    return out


def group(s: Settings) -> str:
    """The Flink source's consumer group: its committed offsets say how far the peer applied."""
    return f"peer-flink-cdc-{s.kafka.cdc_topic_prefix}"


def checkpoints(s: Settings) -> Path:
    return s.run_dir / "peers" / f"{s.kafka.cdc_topic_prefix}-flink-cdc-checkpoints"


def job_file(s: Settings) -> Path:
    return s.run_dir / "peers" / f"{s.kafka.cdc_topic_prefix}-flink-cdc.json"


def prepare(s: Settings, checkpoint_seconds: float, parallelism: int) -> Path:
    """The tables (upsert on), the Flink environment, and the job's JSON file; returns its path."""
    flink_setup.install(s.tools_dir)
    catalog = pyiceberg_catalog(s)
    ensure_dimension_tables(s, catalog)
    for dimension in dimensions(s).values():
        table = catalog.load_table(dimension.table)
        with table.transaction() as tx:
            tx.set_properties(UPSERT_PROPERTIES)
    spec = {**flink_setup.common_spec(s, checkpoints(s), checkpoint_seconds, parallelism), "group": group(s),
            "sources": sources(s), "checkpoints": str(checkpoints(s))}
    # keep completed checkpoints after a kill: the job is started again from the newest (flink_cdc_job.main), and
    # changes arrive in key order per partition, so the sink needs no state of its own to keep them ordered
    spec["flink"].update({"execution.checkpointing.externalized-checkpoint-retention": "RETAIN_ON_CANCELLATION",
                          "state.checkpoints.num-retained": "2",
                          "table.exec.sink.upsert-materialize": "NONE"})
    return flink_setup.write_spec(job_file(s), spec)


def start(s: Settings, job: Path, log: Path) -> subprocess.Popen:
    """The job as a process of its own (its JVM a child of it), output to ``log``."""
    with log.open("ab") as out:
        return subprocess.Popen(
            [str(flink_setup.python(s.tools_dir)), "-m", flink_cdc_job.__name__, str(job)],
            env={**os.environ, **flink_setup.environment(s.tools_dir), "FLINK_LOG_DIR": str(log.parent)},
            stdout=out, stderr=subprocess.STDOUT, start_new_session=True)


#: the group's coordinator moving or loading: librdkafka does not flag these retriable for committed()
_COORDINATOR_ERRORS = {KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
                       KafkaError.COORDINATOR_NOT_AVAILABLE}


def _retriable(exc: BaseException) -> bool:
    return isinstance(exc, KafkaException) and (exc.args[0].retriable() or exc.args[0].code() in _COORDINATOR_ERRORS)


class GroupProgress:
    """How far the peer applied each topic: its consumer group's committed offsets (one client, polled often)."""

    def __init__(self, s: Settings):
        self.s = s
        self.consumer = reader(s.kafka.bootstrap, "flink-cdc-progress", extra={"group.id": group(s)})
        self.partitions: dict[str, list[TopicPartition]] = {}

    def applied(self, topic: str) -> int:
        """Records of ``topic`` the peer has committed, summed over partitions (0 before its first checkpoint)."""
        if topic not in self.partitions:
            self.partitions[topic] = [TopicPartition(topic, p) for p in end_offsets(self.s.kafka.bootstrap, topic)]
        # the group's coordinator moves or loads now and then (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS):
        # retriable errors, asked again for up to a minute
        for attempt in Retrying(retry=retry_if_exception(_retriable), stop=stop_after_delay(60),
                                wait=wait_exponential(multiplier=0.5, max=5), reraise=True):
            with attempt:
                committed = self.consumer.committed(self.partitions[topic], timeout=10)
        return sum(max(tp.offset, 0) for tp in committed)

    def close(self) -> None:
        self.consumer.close()
