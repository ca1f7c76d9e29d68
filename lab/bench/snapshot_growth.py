"""What each snapshot a table keeps costs its writer and a new reader: the click table's append repeated, and, as
its snapshots pile up, the append's time, the metadata file's size and a fresh load of the table.

Every commit writes the table's whole metadata file again, which lists each snapshot kept (its summary, with
the offsets, included), and every new reader (Trino, DuckDB, PyIceberg, the freshness probe) parses it. The
click table keeps ``maintenance.snapshot_retention_minutes`` of snapshots, and a shorter trigger makes more of
them a minute: this tells what that costs, on a scratch copy of the click table.
"""

from __future__ import annotations

import statistics
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from lab.bench.scratch import discard
from lakehouse.catalog import pyiceberg_catalog
from lakehouse.settings import Settings
from pipeline.kafka_source.offsets import commit_properties
from pipeline.spark_session import build_session
from pipeline.tables import ensure_clicks_tables


@dataclass(frozen=True)
class Step:
    """The table after ``snapshots`` appends."""

    snapshots: int
    append_median_s: float  # over the appends since the step before
    append_p95_s: float
    metadata_bytes: int  # the current metadata file
    load_s: float  # a fresh PyIceberg load of the table (reads and parses the metadata file)


def _p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def measure(settings: Settings, rows: int, appends: int, every: int, progress: Callable[[str], None]) -> list[Step]:
    """``appends`` appends of ``rows`` rows to a scratch click table, each with a position in its snapshot as the
    click job writes it; a ``Step`` every ``every`` appends. The scratch tables are dropped afterwards."""
    s = settings.model_copy(deep=True)
    suffix = uuid.uuid4().hex[:8]
    s.catalog.clicks_table, s.catalog.dead_letter_table = f"bench.growth_{suffix}", f"bench.growth_dead_{suffix}"
    spark = build_session(s, "lakehouse-bench-snapshot-growth")
    catalog = pyiceberg_catalog(s)
    steps: list[Step] = []
    try:
        ensure_clicks_tables(spark, s)
        table = s.catalog.clicks_table
        columns = [f"CAST(NULL AS {f.dataType.simpleString()}) AS `{f.name}`" for f in spark.table(table).schema.fields
                   if f.name != "event_time"]
        batch = spark.range(rows, numPartitions=2).selectExpr("current_timestamp() AS event_time", *columns) \
            .localCheckpoint()  # made once: each append times the write and the commit
        times: list[float] = []
        for i in range(1, appends + 1):
            position = commit_properties({"clicks": {0: i * rows, 1: i * rows, 2: i * rows}}, {"clicks": suffix})
            writer = batch.writeTo(table).option("distribution-mode", "none")
            for key, value in position.items():
                writer = writer.option(f"snapshot-property.{key}", value)
            began = time.perf_counter()
            writer.append()
            times.append(time.perf_counter() - began)
            if i % every == 0:
                began = time.perf_counter()
                loaded = catalog.load_table(table)
                load_s = time.perf_counter() - began
                size = len(loaded.io.new_input(loaded.metadata_location))
                steps.append(Step(len(loaded.metadata.snapshots), statistics.median(times), _p95(times), size, load_s))
                times = []
                progress(f"{steps[-1].snapshots} snapshots: append median {steps[-1].append_median_s:.3f} s, "
                         f"metadata {size / 1e6:.2f} MB, fresh load {load_s:.3f} s")
    finally:
        spark.stop()
        discard(s, [s.catalog.clicks_table, s.catalog.dead_letter_table], [])
    return steps
