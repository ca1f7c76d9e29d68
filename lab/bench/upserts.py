"""Upserts that scale: what MERGE costs as delete files pile up, and what folding them buys.

The dimension apply MERGEs with merge-on-read: an update or delete writes a *position
delete* for the old row; an insert of a key never seen before writes none (Iceberg only
deletes matched rows), so a key index or Bloom filter in front of the MERGE has nothing
left to save - the benchmark shows it by counting delete records per batch kind.
What does grow is the delete files readers must merge: the benchmark runs rounds of
update batches and measures MERGE time and read latency (full scan, point lookup) as
deletes accumulate, then folds them (the maintenance `apply_deletes` action) and
measures again.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass

from lakehouse.settings import Settings
from pipeline.maintenance.actions import Actions
from pipeline.tables import UPSERT_PROPERTIES


@dataclass
class UpsertRound:
    label: str
    merge_s: float
    delete_files: int
    delete_records: int
    scan_ms: float
    lookup_ms: float


def _timed_ms(spark, sql: str, repeat: int = 3) -> float:
    best = float("inf")
    for _ in range(repeat):
        began = time.perf_counter()
        spark.sql(sql).collect()
        best = min(best, (time.perf_counter() - began) * 1000)
    return best


def _shape(spark, table: str) -> tuple[int, int]:
    row = spark.sql(f"SELECT count(*) AS files, coalesce(sum(record_count), 0) AS records "
                    f"FROM {table}.delete_files").first()
    return row.files, row.records


def run(spark, settings: Settings, keys: int, batch: int, rounds: int, progress=print) -> list[UpsertRound]:
    table = f"{settings.catalog.name}.bench.upserts_{time.strftime('%Y%m%d%H%M%S')}"
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {settings.catalog.name}.bench")
    props = ", ".join(f"'{k}'='{v}'" for k, v in {"format-version": "2", **UPSERT_PROPERTIES}.items())
    spark.sql(f"CREATE TABLE {table} (id STRING, name STRING, price DECIMAL(10,4)) USING iceberg TBLPROPERTIES ({props})")
    spark.sql(f"INSERT INTO {table} SELECT CAST(id AS STRING), concat('p', id), CAST(id % 100 AS DECIMAL(10,4)) "
              f"FROM range({keys})")
    rng = random.Random(5)
    results: list[UpsertRound] = []

    def merge(label: str, ids: list[int]) -> None:
        spark.createDataFrame([(str(i), f"p{i}-{label}", float(rng.randint(1, 99))) for i in ids],
                              "id STRING, name STRING, price DOUBLE").createOrReplaceTempView("changes")
        before = _shape(spark, table)
        began = time.perf_counter()
        spark.sql(f"MERGE INTO {table} t USING changes s ON t.id = s.id "
                  f"WHEN MATCHED THEN UPDATE SET t.name = s.name, t.price = CAST(s.price AS DECIMAL(10,4)) "
                  f"WHEN NOT MATCHED THEN INSERT (id, name, price) VALUES (s.id, s.name, CAST(s.price AS DECIMAL(10,4)))")
        measure(label, time.perf_counter() - began, before[1])

    def measure(label: str, merge_s: float, records_before: int) -> None:
        files, records = _shape(spark, table)
        result = UpsertRound(label, round(merge_s, 2), files, records - records_before,
                             round(_timed_ms(spark, f"SELECT count(*), sum(price) FROM {table}"), 1),
                             round(_timed_ms(spark, f"SELECT * FROM {table} WHERE id = '{rng.randrange(keys)}'"), 1))
        results.append(result)
        progress(f"  {label:<24} merge {result.merge_s:5.2f} s, delete files {files:3}, "
                 f"+{result.delete_records:,} delete records, scan {result.scan_ms:,.0f} ms, "
                 f"lookup {result.lookup_ms:,.0f} ms")

    merge("new keys only", list(range(keys, keys + batch)))
    for r in range(rounds):
        merge(f"updates, round {r + 1}", rng.sample(range(keys), batch))
    began = time.perf_counter()
    Actions(spark, settings.catalog.name, settings.maintenance).apply_deletes(table)
    progress(f"  folded the delete files into the data in {time.perf_counter() - began:.1f} s")
    measure("after folding (no merge)", 0.0, _shape(spark, table)[1])
    merge("updates, after folding", rng.sample(range(keys), batch))
    spark.sql(f"DROP TABLE {table} PURGE")
    return results
