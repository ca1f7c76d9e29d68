"""Apply Debezium change topics to the Iceberg dimension tables with MERGE INTO.

Reading is the same exactly-once Kafka source as the click pipeline. Each batch is
collapsed per key to its last change *by source position* (binlog file, position,
row), not by arrival, so many updates of one key, delete-then-insert and replays
come out right. Each table's MERGE commit carries the offsets of its own topic.

Why replays are harmless: a batch applies, per key, the full after-image of its last
change (or deletes it). Applying that again, or a longer range that ends later,
yields the same state — so a capture restart that republishes changes, or a crash
between commits, cannot leave a wrong row.
"""

from __future__ import annotations

import functools
import json
import logging
import time
from dataclasses import dataclass

import pyarrow as pa
from pyspark import AccumulatorParam
from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from lakehouse.settings import Settings
from pipeline import metrics
from pipeline.cdc import envelope as env
from pipeline.kafka_source import offsets as kafka_offsets
from pipeline.kafka_source.fetch import records_frame
from pipeline.kafka_source.planner import Planner
from pipeline.kafka_source.ranges import next_offsets
from pipeline.parallel import in_parallel
from pipeline.snapshot_properties import sql_with_properties
from pipeline.tables import ensure_dimension_tables

log = logging.getLogger(__name__)

CHANGE_SCHEMA = pa.schema([("topic", pa.string()), ("partition", pa.int32()), ("offset", pa.int64()),
                           ("tbl", pa.string()), ("op", pa.string()), ("pk", pa.string()),
                           ("order_key", pa.string()), ("source_ts_ms", pa.int64()), ("after", pa.string())])
CHANGE_DDL = ("topic STRING, partition INT, offset BIGINT, tbl STRING, op STRING, pk STRING, order_key STRING, "
              "source_ts_ms BIGINT, after STRING")


class EnvelopeError(ValueError):
    """A change record the apply job cannot interpret; it stops rather than guess."""


@dataclass(frozen=True)
class Target:
    source_table: str
    table: str
    key: str
    columns: dict[str, str]  # target column -> SQL expression over the parsed after-image `a`


def targets(settings: Settings) -> dict[str, Target]:
    ts = "to_timestamp(a.update_time, \"yyyy-MM-dd'T'HH:mm:ss.SSSX\")"
    return {
        settings.cdc_topic("products"): Target("products", settings.catalog.products_table, "productId", {
            "productId": "a.productId", "name": "a.name", "description": "a.description",
            "product_price": "CAST(a.product_price AS DECIMAL(10,4))", "update_time": ts}),
        settings.cdc_topic("user_member"): Target("user_member", settings.catalog.members_table, "userid", {
            "userid": "a.userid", "name": "a.name", "show_params": "a.show_params",
            "member_level": "CAST(a.memberLevel AS INT)", "update_time": ts}),
    }


class ChangeCounts(AccumulatorParam):
    """Per topic: (upserts, deletes, oldest source ts in ms) of the changes read, summed from the tasks.

    Counted where the changes are parsed, so a batch needs no Spark job of its own for its
    metrics (a group-by over the batch cost ~0.5 s of every batch). A retried task may count
    twice: metrics only.
    """

    def zero(self, value: dict) -> dict:
        return {}

    def addInPlace(self, value1: dict, value2: dict) -> dict:  # noqa: N802 - Spark's name
        for topic, (ups, dels, oldest) in value2.items():
            u, d, o = value1.get(topic, (0, 0, None))
            value1[topic] = (u + ups, d + dels, oldest if o is None else min(o, oldest))
        return value1


def parse_changes(raw: pa.RecordBatch, keys: dict[str, str], counts=None) -> pa.RecordBatch:
    """Raw Kafka records -> one row per change; raises EnvelopeError on anything unknown."""
    out: dict[str, list] = {name: [] for name in CHANGE_SCHEMA.names[3:]}
    topics = raw.column("topic").to_pylist()
    for i, value in enumerate(raw.column("value").to_pylist()):
        where = f"{topics[i]}[{raw.column('partition')[i]}]@{raw.column('offset')[i]}"
        if value is None:
            raise EnvelopeError(f"{where}: tombstone (null value) not expected from the lakehouse capture")
        change = _change(value, keys[topics[i]], where)
        for name, item in zip(("tbl", "op", "pk", "order_key", "source_ts_ms", "after"), change, strict=True):
            out[name].append(item)
    arrays = [raw.column("topic"), raw.column("partition"), raw.column("offset")]
    arrays += [pa.array(out[n], type=CHANGE_SCHEMA.field(n).type) for n in CHANGE_SCHEMA.names[3:]]
    if counts is not None:
        seen: dict = {}
        for topic, op, ts in zip(topics, out["op"], out["source_ts_ms"], strict=True):
            u, d, o = seen.get(topic, (0, 0, ts))
            seen[topic] = (u + (op != "d"), d + (op == "d"), min(o, ts))
        counts.add(seen)
    return pa.RecordBatch.from_arrays(arrays, schema=CHANGE_SCHEMA)


def _change(value: bytes, key: str, where: str) -> tuple:
    """(table, op, pk, order key, source ts, after JSON) of one envelope, or EnvelopeError saying what is wrong."""
    try:
        record = json.loads(value)
    except ValueError as exc:
        raise EnvelopeError(f"{where}: not JSON ({str(exc)[:120]})") from None
    if not isinstance(record, dict):
        raise EnvelopeError(f"{where}: not a Debezium envelope (a JSON {type(record).__name__})")
    op, source = record.get("op"), record.get("source")
    if not isinstance(op, str) or op not in env.OPS:
        raise EnvelopeError(f"{where}: unknown op {op!r} (expected c, u, d, r)")
    image = record.get("before") if op == "d" else record.get("after")
    if not isinstance(image, dict):
        raise EnvelopeError(f"{where}: op {op!r} without its {'before' if op == 'd' else 'after'} image")
    if key not in image or image[key] is None:
        raise EnvelopeError(f"{where}: the {'before' if op == 'd' else 'after'} image has no key column {key!r}")
    ts = source.get("ts_ms") if isinstance(source, dict) else None
    if not isinstance(ts, int) or isinstance(ts, bool) or not 0 <= ts < 2**63:
        raise EnvelopeError(f"{where}: source block missing or without an integer ts_ms")
    if not isinstance(source.get("table"), str):
        raise EnvelopeError(f"{where}: source block without its table name")
    try:
        order = env.order_key(source)
    except (KeyError, TypeError, ValueError) as exc:
        raise EnvelopeError(f"{where}: source block without its binlog position ({exc!r})") from None
    return (source.get("table"), op, str(image[key]), order, source["ts_ms"],
            json.dumps(record["after"]) if op != "d" else None)


class DimensionApplyJob:
    name = "dims"

    def __init__(self, spark: SparkSession, settings: Settings):
        self.spark, self.settings = spark, settings
        ensure_dimension_tables(spark, settings)
        self.targets = targets(settings)
        self.tables = [t.table for t in self.targets.values()]
        self.planner = Planner.from_settings(settings, list(self.targets))
        self.recover()

    def recover(self) -> None:
        self.committed: kafka_offsets.Offsets = {}
        self.committed_ids: dict[str, str] = {}
        for topic, target in self.targets.items():
            position = kafka_offsets.committed_position(self.spark, target.table)
            self.committed.update({t: o for t, o in position.offsets.items() if t == topic})
            self.committed_ids.update({t: i for t, i in position.topic_ids.items() if t == topic})

    def close(self) -> None:
        self.planner.close()

    def run_once(self) -> int:
        began = time.monotonic()
        ranges, marks = self.planner.plan(self.committed, self.committed_ids)
        work = [r for r in ranges if r.size > 0]
        for r in ranges:
            metrics.LAG.labels(self.name, r.topic, str(r.partition)).set(marks[(r.topic, r.partition)].high - r.start)
        if not work:
            metrics.BATCHES.labels(self.name, "idle").inc()
            return 0
        keys = {topic: t.key for topic, t in self.targets.items()}
        counts = self.spark.sparkContext.accumulator({}, ChangeCounts())
        changes = records_frame(self.spark, work, self.settings.kafka.bootstrap, CHANGE_DDL,
                                functools.partial(parse_changes, keys=keys, counts=counts),
                                fetch_wait_ms=self.settings.kafka.fetch_wait_max_ms).persist()
        ends = next_offsets(ranges)

        def apply(topic: str) -> None:
            offsets = {topic: ends[topic]}
            self._merge(changes.filter(F.col("topic") == topic), self.targets[topic], offsets)
            self.committed[topic] = offsets[topic]
            self.committed_ids[topic] = self.planner.topic_ids[topic]

        topics = sorted({r.topic for r in work})
        try:  # one MERGE per table, side by side (each commits its own topic's offsets)
            in_parallel(self.spark, [functools.partial(apply, topic) for topic in topics])
        finally:
            changes.unpersist()
        total = sum(self._count(self.targets[topic].table, counts.value.get(topic)) for topic in topics)
        metrics.ROWS.labels(self.name, "in").inc(total)
        metrics.BATCHES.labels(self.name, "committed").inc()
        metrics.BATCH_SECONDS.labels(self.name).observe(time.monotonic() - began)
        return max(total, 1)

    @staticmethod
    def _count(table: str, counted: tuple[int, int, int] | None) -> int:
        """Metrics of one table's applied changes; returns how many there were."""
        if counted is None:
            return 0
        upserts, deletes, oldest = counted
        metrics.CDC_APPLIED.labels(table, "upsert").inc(upserts)
        metrics.CDC_APPLIED.labels(table, "delete").inc(deletes)
        metrics.DIMENSION_APPLY_LAG.labels(table).set(time.time() - oldest / 1000)
        return upserts + deletes

    def _merge(self, changes: DataFrame, target: Target, offsets: dict) -> None:
        latest = (changes.withColumn("_n", F.row_number().over(
                      Window.partitionBy("pk").orderBy(F.col("order_key").desc())))
                  .filter("_n = 1").drop("_n"))
        after_schema = ", ".join(f"{c} STRING" for c in self._source_columns(target))
        source = latest.select("op", "pk", "source_ts_ms", F.from_json("after", after_schema).alias("a"))
        view = f"_cdc_{target.source_table}"
        source.selectExpr("op", "pk", "source_ts_ms", *[f"{expr} AS {col}" for col, expr in target.columns.items()]) \
            .createOrReplaceTempView(view)
        cols = list(target.columns)
        statement = (
            f"MERGE INTO {target.table} t USING {view} s ON t.{target.key} = s.pk "
            f"WHEN MATCHED AND s.op = 'd' THEN DELETE "
            f"WHEN MATCHED THEN UPDATE SET {', '.join(f't.{c} = s.{c}' for c in cols)} "
            f"WHEN NOT MATCHED AND s.op <> 'd' THEN INSERT ({', '.join(cols)}) VALUES ({', '.join(f's.{c}' for c in cols)})"
        )
        began = time.monotonic()
        sql_with_properties(self.spark, statement, kafka_offsets.commit_properties(offsets, self.planner.topic_ids))
        metrics.COMMIT_SECONDS.labels(target.table).observe(time.monotonic() - began)
        metrics.LAST_COMMIT.labels(target.table).set(time.time())
        log.info("dims: merged into %s in %.2fs", target.table, time.monotonic() - began)

    @staticmethod
    def _source_columns(target: Target) -> list[str]:
        """Fields of the source row the column expressions read (a.<field>)."""
        import re

        return sorted({m for expr in target.columns.values() for m in re.findall(r"a\.(\w+)", expr)})
