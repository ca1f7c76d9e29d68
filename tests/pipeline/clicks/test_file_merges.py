"""The click job's merges of its own small files, on real Kafka, S3, metastore and Spark."""

from __future__ import annotations

import time

from pyiceberg.table.snapshots import Operation

from lakehouse.catalog import pyiceberg_catalog
from pipeline.clicks.file_merges import MERGE_PROPERTY
from pipeline.clicks.job import ClickIngestJob
from pipeline.kafka_source.offsets import OFFSETS_PROPERTY
from pipeline.maintenance.job import MaintenanceJob
from tests.support.clicks import assert_rows_are_the_events, drain, rows


def test_the_job_merges_its_own_small_files_and_every_event_stays_once(spark, click_settings, producer):
    click_settings.pipeline.merge_seconds = 2  # horizon 8 s: two first-level files wait 4 s, within it
    click_settings.pipeline.merge_fan_in = 2
    name = click_settings.catalog.clicks_table
    job = ClickIngestJob(spark, click_settings)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            producer.send(150)
            drain(job)
            time.sleep(0.1)
            levels = {s.summary.additional_properties.get(MERGE_PROPERTY)
                      for s in pyiceberg_catalog(click_settings).load_table(name).snapshots()}
            if any(level and "1" in level for level in levels):
                break
        merged = job.merges.merged
    finally:
        job.close()

    table = pyiceberg_catalog(click_settings).load_table(name)
    snapshots = table.snapshots()
    appends = [s for s in snapshots if s.summary.operation == Operation.APPEND]
    replaces = [s for s in snapshots if s.summary.operation == Operation.REPLACE]
    assert replaces, "the job committed no merge"
    assert any("1" in s.summary.additional_properties[MERGE_PROPERTY] for s in replaces), \
        "no merge of the first merges' files"
    for s in replaces:  # a merge moves rows between files: none added or removed, no offsets moved
        summary = s.summary.additional_properties
        assert summary["added-records"] == summary["deleted-records"]
        assert OFFSETS_PROPERTY not in summary
    written = sum(int(s.summary.additional_properties["added-data-files"]) for s in appends)
    live = len(table.inspect.files())
    assert merged > 0 and live < written, f"{live} live files of the {written} the batches wrote"
    assert_rows_are_the_events(rows(spark, name), producer.sent, click_settings.kafka.clicks_topic)


def test_maintenance_leaves_the_files_the_job_may_still_merge(spark, click_settings, producer):
    click_settings.pipeline.merge_seconds = 600  # none due in this test: every file is still the job's
    for key, value in {"compact_small_files": 2, "snapshot_retention_minutes": 60}.items():
        setattr(click_settings.maintenance, key, value)
    job = ClickIngestJob(spark, click_settings)
    try:
        for _ in range(3):
            producer.send(200)
            drain(job)
    finally:
        job.close()
    name = click_settings.catalog.clicks_table

    def compacted(settings) -> int:
        maintenance = MaintenanceJob(spark, settings)
        maintenance.run_once()
        assert maintenance._pass.errors == []  # a compaction that failed (its filter, say) is not "none rewritten"
        mine = [r for t, r in maintenance.results if r.action == "compact" and t.endswith(name)]
        assert mine, "maintenance did not compact the click table"
        return sum(r.files_rewritten for r in mine)

    assert compacted(click_settings) == 0, "maintenance rewrote files the job may still merge"
    assert len(pyiceberg_catalog(click_settings).load_table(name).inspect.files()) >= 3
    click_settings.pipeline.merge_seconds = 0  # the job merges nothing: maintenance takes them all
    assert compacted(click_settings) >= 3
    assert_rows_are_the_events(rows(spark, name), producer.sent, click_settings.kafka.clicks_topic)
