"""Where a batch's time goes (lab/bench/batch_breakdown.py), read from the event log a real Spark writes."""

from __future__ import annotations

import subprocess
import sys
import uuid

from lab.bench.batch_breakdown import PHASES, appends_to, event_log_file

#: a Spark application with its event log on that appends twice to an Iceberg table of the stack's catalog
APPEND_TWICE = """
import sys
from pathlib import Path
from lab.bench.batch_breakdown import event_log_conf
from lakehouse.settings import load_settings
from pipeline.spark_session import build_session
events, table = Path(sys.argv[1]), sys.argv[2]
spark = build_session(load_settings(), "lakehouse-test-breakdown", conf=event_log_conf(events))
spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {table.split('.')[0]}")
spark.sql(f"CREATE TABLE {table} (id BIGINT) USING iceberg")
for rows in (100, 250):
    spark.range(rows).writeTo(table).append()
spark.sql(f"DROP TABLE {table} PURGE")
spark.stop()
"""


def test_each_append_to_the_table_is_one_batch_with_its_phases(settings, tmp_path):
    table = f"{settings.catalog.clicks_table.split('.')[0]}.breakdown_{uuid.uuid4().hex[:8]}"
    events = tmp_path / "events"
    events.mkdir()
    subprocess.run([sys.executable, "-c", APPEND_TWICE, str(events), table], check=True, timeout=300,
                   capture_output=True)
    log = event_log_file(events)
    batches = appends_to(log, table, since_ms=0)
    assert [b.records for b in batches] == [100, 250]
    for batch in batches:
        assert set(batch.phases) == set(PHASES)
        assert all(seconds >= 0 for seconds in batch.phases.values()), batch.phases
        parts = sum(batch.phases[p] for p in PHASES if p != "whole execution")
        assert abs(parts - batch.phases["whole execution"]) < 0.002, batch.phases  # the phases tile the execution
        assert batch.tasks >= 1 and batch.task_run_s > 0
    assert appends_to(log, f"{table}_other", since_ms=0) == []  # another table's appends are not its batches
