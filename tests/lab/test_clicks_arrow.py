"""The click job's peer without Spark (``lab.peers.clicks_arrow``) on real Kafka, S3 and metastore.

It must write what the Spark job writes: every valid event once, enriched; every bad one in
the dead-letter table once; the offsets in the commit of the rows; new fields as columns in
the batch that brings them. Spark reads the tables back, a reader other than the writer.
"""

from __future__ import annotations

import pytest
from pyiceberg.transforms import DayTransform

from lab.peers.clicks_arrow import ArrowClickJob
from lakehouse.catalog import pyiceberg_catalog
from pipeline.kafka_source.offsets import committed_offsets
from tests.support.clicks import assert_rows_are_the_events, drain, rows


def test_every_event_once_enriched_bad_ones_dead_lettered(spark, click_settings, producer):
    cat = click_settings.catalog
    click_settings.pipeline.max_records_per_partition = 150  # many batches: the reader goes on where it stopped
    job = ArrowClickJob(None, click_settings)  # creates the click, dead-letter and (empty) dimension tables
    spark.sql(f"INSERT INTO {cat.products_table} VALUES ('1', 'test01', 'd', 1.1000, current_timestamp())")
    spark.sql(f"INSERT INTO {cat.members_table} VALUES ('513248', 'm', '{{}}', 3, current_timestamp())")
    producer.send(1200, bad_share=0.02)
    producer.send(100, productId="1", uid="513248")
    assert len(producer.sent.bad) >= 10
    try:
        assert drain(job, max_batches=40) > 3
        snapshots = len(pyiceberg_catalog(click_settings).load_table(cat.clicks_table).snapshots())
        assert job.run_once() == 0, "an idle batch commits nothing"
        assert len(pyiceberg_catalog(click_settings).load_table(cat.clicks_table).snapshots()) == snapshots
    finally:
        job.close()

    clicks = rows(spark, cat.clicks_table)
    assert_rows_are_the_events(clicks, producer.sent, click_settings.kafka.clicks_topic)
    for r in clicks:
        if r.productId == "1" and r.uid == "513248":
            assert (r.name, str(r.product_price), r.member_level) == ("test01", "1.1000", 3)
    dead = rows(spark, cat.dead_letter_table)
    assert {bytes(r.raw): r.error_kind for r in dead} == {
        p: {"event_time": "out_of_range"}.get(k, k) for p, k in producer.sent.bad.items()}
    assert len({(r.kafka_partition, r.kafka_offset) for r in dead}) == len(dead)
    committed = committed_offsets(spark, cat.clicks_table)[click_settings.kafka.clicks_topic]
    last = {}
    for r in clicks + dead:
        last[r.kafka_partition] = max(last.get(r.kafka_partition, -1), r.kafka_offset)
    assert committed == {p: o + 1 for p, o in last.items()}


def test_the_table_it_creates_is_the_one_spark_creates(spark, click_settings):
    ArrowClickJob(None, click_settings).close()
    table = pyiceberg_catalog(click_settings).load_table(click_settings.catalog.clicks_table)
    (field,) = table.spec().fields
    assert isinstance(field.transform, DayTransform) and table.schema().find_field(field.source_id).name == "event_time"
    assert [table.schema().find_field(f.source_id).name for f in table.sort_order().fields] == ["productId", "event_time"]
    assert table.format_version == 2 and table.properties["write.parquet.compression-codec"] == "zstd"
    ddl = spark.sql(f"SHOW CREATE TABLE {click_settings.catalog.clicks_table}").collect()[0][0]
    assert "PARTITIONED BY (days(event_time))" in ddl and "COMMENT 'event time as sent, epoch millis'" in ddl


class StopsBeforeDeadLetters(ArrowClickJob):
    """A job that dies between a batch's click commit and its dead-letter commit (the crash window)."""

    def _write_dead_letters(self, parsed, target, now):
        raise RuntimeError("killed between the two commits")


def test_dead_letters_of_a_batch_cut_short_are_written_on_recovery(spark, click_settings, producer):
    cat = click_settings.catalog
    producer.send(800, bad_share=0.05)
    crashing = StopsBeforeDeadLetters(None, click_settings)
    try:
        with pytest.raises(RuntimeError, match="between the two commits"):
            crashing.run_once()
    finally:
        crashing.close()
    assert len(rows(spark, cat.clicks_table)) == len(producer.sent.valid), "the click commit landed"
    assert len(rows(spark, cat.dead_letter_table)) == 0, "its dead letters did not"
    producer.send(400, bad_share=0.05)
    job = ArrowClickJob(None, click_settings)
    try:
        job.run_once()  # its first batch writes the missing dead letters before anything else
        assert len(rows(spark, cat.dead_letter_table)) > 0
        drain(job)
        job.recover()  # nothing is missing now: a catch-up after another recovery writes nothing again
        assert job.run_once() == 0
    finally:
        job.close()
    ids = [r.event_id for r in rows(spark, cat.clicks_table)]
    assert len(ids) == len(set(ids)) and set(ids) == set(producer.sent.valid)
    dead = rows(spark, cat.dead_letter_table)
    assert sorted(bytes(r.raw) for r in dead) == sorted(producer.sent.bad)
    assert len({(r.kafka_partition, r.kafka_offset) for r in dead}) == len(dead)


def test_a_new_field_becomes_a_column_in_the_commit_of_its_rows(spark, click_settings, producer):
    cat = click_settings.catalog
    producer.send(100)
    job = ArrowClickJob(None, click_settings)
    try:
        drain(job)
        producer.send(60, deviceType="ios")
        assert job.run_once() > 0
        evolved = pyiceberg_catalog(click_settings).load_table(cat.clicks_table)
        assert evolved.schema().find_field("deviceType").field_type.__str__() == "string"
        summary = evolved.current_snapshot().summary.additional_properties
        assert "deviceType" in summary["lakehouse.schema-change"] and "lakehouse.kafka-offsets" in summary
        producer.send(40)
        drain(job)
    finally:
        job.close()
    clicks = rows(spark, cat.clicks_table)
    assert len(clicks) == len({r.event_id for r in clicks}) == 200
    assert sum(r.deviceType == "ios" for r in clicks) == 60

