"""What the Hive Metastore's commit lock costs a Spark commit: the same append with the lock and without.

Iceberg's Hive catalog takes a metastore lock around each commit. A metastore with HIVE-26882
(Hive 2.3.10, which Spark 4.1's jars carry) also accepts a commit that names the metadata it
replaces, with no lock (table property ``engine.hive.lock-enabled=false``). This measures the
difference on click-sized appends, alternating the two modes so both see the same machine; the
decision it informs is written in docs/spark-4.md.
"""

from __future__ import annotations

import statistics
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from lab.bench.scratch import discard
from lakehouse.settings import Settings
from pipeline.spark_session import build_session

LOCK_PROPERTY = "engine.hive.lock-enabled"


@dataclass
class CommitTimes:
    mode: str
    seconds: list[float]

    @property
    def median_s(self) -> float:
        return statistics.median(self.seconds)

    @property
    def p95_s(self) -> float:
        ordered = sorted(self.seconds)
        return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def measure(settings: Settings, rows: int, rounds: int, progress: Callable[[str], None]) -> list[CommitTimes]:
    """``rounds`` appends of ``rows`` rows to each of two scratch tables (locked, lock-free), alternating."""
    spark = build_session(settings, "lakehouse-bench-commit-lock")
    suffix = uuid.uuid4().hex[:8]
    tables = {"metastore lock": f"bench.commit_lock_{suffix}", "no lock (HIVE-26882)": f"bench.commit_free_{suffix}"}
    times = {mode: CommitTimes(mode, []) for mode in tables}
    try:
        spark.sql("CREATE NAMESPACE IF NOT EXISTS bench")
        for mode, table in tables.items():
            enabled = "true" if mode == "metastore lock" else "false"
            spark.sql(f"CREATE TABLE {table} (event_id string, uid string, productId string, ts timestamp) USING iceberg "
                      f"TBLPROPERTIES ('format-version'='2', '{LOCK_PROPERTY}'='{enabled}')")
        batch = spark.range(rows).selectExpr("uuid() AS event_id", "cast(id % 1000 AS string) AS uid",
                                             "cast(id % 100 AS string) AS productId", "current_timestamp() AS ts")
        batch = batch.localCheckpoint()  # the rows are made once: each round times the write and the commit
        for table in tables.values():  # a warm-up each: the first write compiles
            batch.writeTo(table).append()
        for i in range(rounds):
            for mode, table in tables.items():
                began = time.perf_counter()
                batch.writeTo(table).append()
                times[mode].seconds.append(time.perf_counter() - began)
            progress(f"round {i + 1}/{rounds}: " + ", ".join(f"{m} {t.seconds[-1]:.3f} s" for m, t in times.items()))
    finally:
        spark.stop()
        discard(settings, list(tables.values()), [])
    return list(times.values())
