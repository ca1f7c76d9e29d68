"""The batch that changes the click table's schema: new columns, rows and offsets in one commit.

A Spark write binds the table's schema before it writes a file, and Iceberg's Spark
``mergeSchema`` commits the new schema on its own before the data: a crash between the two
would leave columns without the rows that brought them. So the batch that first carries a new
field (rare: once per field an app release adds) is written on the driver with PyIceberg, in
one transaction that updates the schema, records the change in the contract's history and
appends the rows with the batch's offsets. A kill -9 at any moment leaves either the old
schema and none of the batch, or the new schema and all of it; the batch after a restart
reads the same records again and decides the same change (``evolution.decide``).

The batch is parsed twice on the driver: once to collect what its fields ask for, then with
the evolved shape, exactly as a Spark task parses it afterwards (and as the job's catch-up
would after a crash), so both tables classify every record alike. Its dead letters are
counted and carried as a Spark task carries them (``batch_stats.count_batch``) and written
in the background like any batch's.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
from pyiceberg.types import BooleanType, DoubleType, FloatType, IntegerType, LongType, StringType

from lakehouse.catalog import pyiceberg_catalog
from lakehouse.contract import click_contract
from lakehouse.settings import Settings
from pipeline.clicks.batch_stats import BatchStats, count_batch
from pipeline.clicks.evolution import ARROW_TYPES, Change, Shape, decide
from pipeline.clicks.validate import Limits, parse_batch
from pipeline.dimensions import Dimensions, enrich_batch
from pipeline.kafka_source.ranges import OffsetRange
from pipeline.kafka_source.stream import PartitionReader, RangePartition
from pipeline.lake_writer.catalog_tables import commit_attempts
from pipeline.tables import CLICKS_FROM_EVENT, CLICKS_WRITE_ORDER

log = logging.getLogger(__name__)

#: table property: every evolution of the click table, oldest first (JSON list; kept when snapshots expire)
HISTORY_PROPERTY = "lakehouse.contract.history"
#: snapshot-summary key of the commit that evolved the schema: its changes
CHANGE_PROPERTY = "lakehouse.schema-change"

ICEBERG_TYPES = {"boolean": BooleanType(), "int": IntegerType(), "long": LongType(), "float": FloatType(),
                 "double": DoubleType(), "string": StringType()}
TIMESTAMP = pa.timestamp("us", tz="UTC")


@dataclass
class EvolvedBatch:
    changes: list[Change]
    shape: Shape
    stats: BatchStats  # what Spark's tasks would have counted and carried back


def _millis(column: pa.ChunkedArray) -> pa.ChunkedArray:
    return pc.multiply(column, 1000).cast(pa.int64()).cast(TIMESTAMP)


def click_rows(parsed: pa.Table, shape: Shape, now: dt.datetime) -> pa.Table:
    """The valid records as click-table rows: the columns ``ClickIngestJob._clicks`` selects in Spark."""
    valid = parsed.filter(pc.is_null(parsed["error"]))
    columns = {name: valid[name] for name in CLICKS_FROM_EVENT}
    columns |= {
        "event_time": _millis(valid["updateTime"]),
        "produced_at": _millis(valid["timestamp_ms"]),
        "ingest_time": pa.array([now] * valid.num_rows, TIMESTAMP),
        "kafka_topic": valid["topic"],
        "kafka_partition": valid["partition"],
        "kafka_offset": valid["offset"],
    }
    columns |= {name: valid[name].cast(ARROW_TYPES[kind]) for name, kind in shape.columns}
    rows = pa.table(columns)
    return rows.sort_by(CLICKS_WRITE_ORDER)  # the table's write order, as Spark's writes keep it


def history_entry(changes: list[Change], ranges: list[OffsetRange], at: dt.datetime) -> dict:
    """What the contract's history records of one evolution: what changed, when, from which offsets."""
    offsets: dict[str, dict[str, list[int]]] = {}
    for r in ranges:
        offsets.setdefault(r.topic, {})[str(r.partition)] = [r.start, r.end]
    return {"at": at.isoformat(timespec="milliseconds"), "contract": click_contract().version,
            "changes": [c.as_dict() for c in changes], "offsets": offsets}


def parse(raws: list[pa.RecordBatch], shape: Shape, limits: Limits, dims: Dimensions
          ) -> tuple[list[pa.RecordBatch], list[Change], Shape]:
    """Parse and enrich a batch, and decide the schema changes its fields ask for: (batches, changes, new shape).

    Parsed once when no field asks for a change (every batch but the rare evolving one); else
    parsed again with the evolved shape, as any later read of the batch will parse it.
    """
    proposals: list[tuple[str, str]] = []
    parsed = [parse_batch(raw, limits, shape=shape, proposals=proposals) for raw in raws]
    if not proposals:
        return [enrich_batch(batch, dims) for batch in parsed], [], shape
    changes = decide(shape, proposals)
    evolved = shape.evolved(changes)
    return [enrich_batch(parse_batch(raw, limits, shape=evolved), dims) for raw in raws], changes, evolved


def stage_changes(tx, table, changes: list[Change], entry: dict) -> dict[str, str]:
    """Stage the schema changes and their history entry in ``tx``; returns the snapshot properties recording them."""
    if not changes:
        return {}
    history = json.loads(table.properties.get(HISTORY_PROPERTY, "[]"))
    with tx.update_schema() as update:
        for change in changes:
            if change.action == "added":
                update.add_column(change.field, ICEBERG_TYPES[change.type],
                                  doc=f"added by schema evolution at {entry['at']}")
            else:
                update.update_column(change.field, field_type=ICEBERG_TYPES[change.type])
    tx.set_properties({HISTORY_PROPERTY: json.dumps([*history, entry], separators=(",", ":"))})
    return {CHANGE_PROPERTY: json.dumps(entry["changes"], separators=(",", ":"))}


def write(settings: Settings, ranges: list[OffsetRange], shape: Shape, limits: Limits, dims: Dimensions,
          properties: dict[str, str], now: dt.datetime, planned_at_ms: int) -> EvolvedBatch:
    """Read, decide, parse and commit one evolving batch; its dead letters come back in the stats."""
    raws = list(PartitionReader(settings.kafka.bootstrap, settings.kafka.fetch_wait_max_ms)
                .read(RangePartition(tuple(ranges))))
    batches, changes, evolved = parse(raws, shape, limits, dims)
    stats = BatchStats()
    for batch in batches:
        stats.merge(count_batch(batch, planned_at_ms))
    rows = click_rows(pa.Table.from_batches(batches), evolved, now)
    entry = history_entry(changes, ranges, now)
    log.info("clicks: evolving the click table (%s) in the commit of %d rows",
             ", ".join(c.describe() for c in changes), rows.num_rows)
    for attempt in commit_attempts():
        with attempt:
            table = pyiceberg_catalog(settings).load_table(settings.catalog.clicks_table)
            with table.transaction() as tx:
                recorded = stage_changes(tx, table, changes, entry)
                tx.append(rows, snapshot_properties={**properties, **recorded})
    return EvolvedBatch(changes, evolved, stats)
