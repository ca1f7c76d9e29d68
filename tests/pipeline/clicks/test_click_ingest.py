"""Click ingestion on real Kafka, S3, metastore and Spark."""

from __future__ import annotations

import json
import time

import pytest

from lakehouse.errors import FatalError
from pipeline.clicks.job import ClickIngestJob
from pipeline.kafka_source.offsets import committed_offsets
from tests.support.clicks import assert_rows_are_the_events, drain, rows


def test_valid_events_land_once_and_bad_ones_in_dead_letter(spark, click_settings, producer):
    producer.send(3000, bad_share=0.01)
    assert len(producer.sent.bad) >= 10
    job = ClickIngestJob(spark, click_settings)
    try:
        assert drain(job) >= 1
        snapshots_before = spark.table(f"{click_settings.catalog.clicks_table}.snapshots").count()
        assert job.run_once() == 0, "an idle batch commits nothing"
        assert spark.table(f"{click_settings.catalog.clicks_table}.snapshots").count() == snapshots_before
    finally:
        job.close()

    clicks = rows(spark, click_settings.catalog.clicks_table)
    assert_rows_are_the_events(clicks, producer.sent, click_settings.kafka.clicks_topic)

    dead = rows(spark, click_settings.catalog.dead_letter_table)
    assert {bytes(r.raw): r.error_kind for r in dead} == {
        p: {"event_time": "out_of_range"}.get(k, k) for p, k in producer.sent.bad.items()}
    assert all(r.error and r.kafka_offset is not None and r.ingest_time for r in dead)

    committed = committed_offsets(spark, click_settings.catalog.clicks_table)[click_settings.kafka.clicks_topic]
    per_partition = {}
    for r in clicks + dead:
        per_partition[r.kafka_partition] = max(per_partition.get(r.kafka_partition, -1), r.kafka_offset)
    assert committed == {p: o + 1 for p, o in per_partition.items()}


def test_every_batch_runs_in_the_same_standing_spark_tasks(spark, click_settings, producer):
    """One Spark job for the job's life: its tasks stay up and do every batch (no job, no task launch a batch)."""
    tracker = spark.sparkContext.statusTracker()
    job = ClickIngestJob(spark, click_settings)
    try:
        producer.send(300)
        batches = drain(job)  # the first batch starts the tasks
        group = job.tasks._group
        for _ in range(3):
            time.sleep(0.01)  # each batch a later ingest time
            producer.send(300)
            batches += drain(job)
        assert batches >= 4
        jobs = tracker.getJobIdsForGroup(group)
        assert len(jobs) == 1, "a batch started a Spark job of its own"
        info = tracker.getJobInfo(jobs[0])
        assert info is not None and info.status == "RUNNING"
        assert tracker.getStageInfo(info.stageIds[0]).numTasks == click_settings.pipeline.click_tasks
    finally:
        job.close()
    assert tracker.getJobInfo(jobs[0]).status == "SUCCEEDED", "closing the job ends its tasks"
    stamps = {}
    for r in rows(spark, click_settings.catalog.clicks_table):
        stamps.setdefault(r.ingest_time, set()).add(r.kafka_offset)
    assert len(stamps) == batches, "one ingest time per batch"
    assert None not in stamps


def test_table_layout(spark, click_settings, producer):
    producer.send(10)
    job = ClickIngestJob(spark, click_settings)
    job.close()
    table = click_settings.catalog.clicks_table
    props = {r.key: r.value for r in spark.sql(f"SHOW TBLPROPERTIES {table}").collect()}
    assert props["format-version"] == "2"
    assert props["write.metadata.delete-after-commit.enabled"] == "true"
    assert "productId" in props.get("sort-order", "")
    ddl = spark.sql(f"SHOW CREATE TABLE {table}").collect()[0][0]
    assert "PARTITIONED BY (days(event_time))" in ddl


def test_restart_resumes_from_the_table(spark, click_settings, producer):
    producer.send(500)
    first = ClickIngestJob(spark, click_settings)
    drain(first)
    first.close()
    producer.send(700)
    second = ClickIngestJob(spark, click_settings)
    assert second.committed, "a new job starts from the offsets in the table"
    drain(second)
    second.close()
    ids = [r.event_id for r in rows(spark, click_settings.catalog.clicks_table)]
    assert len(ids) == len(set(ids)) == 1200


def test_dimension_change_is_seen_by_later_events_only(spark, click_settings, producer):
    cat = click_settings.catalog
    job = ClickIngestJob(spark, click_settings)  # creates the (empty) dimension tables
    spark.sql(f"INSERT INTO {cat.products_table} VALUES ('1', 'test01', 'd', 1.1000, current_timestamp())")
    spark.sql(f"INSERT INTO {cat.members_table} VALUES ('513248', 'm', '{{}}', 1, current_timestamp())")
    producer.send(50, productId="1", uid="513248")
    producer.send(20, productId="19")  # no such product: keeps nulls
    drain(job)
    before = set(producer.sent.valid)
    spark.sql(f"UPDATE {cat.products_table} SET name = 'renamed', product_price = 8.1000 WHERE productId = '1'")
    spark.sql(f"UPDATE {cat.members_table} SET member_level = 2 WHERE userid = '513248'")
    producer.send(50, productId="1", uid="513248")
    drain(job)
    job.close()
    result = {r.event_id: r for r in rows(spark, cat.clicks_table)}
    for event_id, r in result.items():
        if r.productId == "19":
            assert r.name is None and r.product_price is None
            continue
        if r.productId != "1":
            continue
        if event_id in before:
            assert (r.name, str(r.product_price), r.member_level) == ("test01", "1.1000", 1)
        else:
            assert (r.name, str(r.product_price), r.member_level) == ("renamed", "8.1000", 2)


def test_offsets_property_is_json_per_topic(spark, click_settings, producer):
    producer.send(30)
    job = ClickIngestJob(spark, click_settings)
    drain(job)
    job.close()
    summary = spark.sql(f"SELECT summary FROM {click_settings.catalog.clicks_table}.snapshots").collect()[-1][0]
    offsets = json.loads(summary["lakehouse.kafka-offsets"])
    assert set(offsets) == {click_settings.kafka.clicks_topic}
    assert sum(offsets[click_settings.kafka.clicks_topic].values()) == 30


@pytest.mark.parametrize("policy", ["fail", "earliest"])
def test_offsets_outside_retained_range_follow_the_setting(spark, click_settings, producer, policy):
    """The planner counts each out-of-range position itself, for every job that plans: it used to be
    counted only when the click job drained ``expired_events``, never for the CDC topics."""
    from prometheus_client import REGISTRY

    from pipeline.kafka_source.planner import OffsetsExpiredError, Planner

    def counted() -> float:
        labels = {"topic": click_settings.kafka.clicks_topic, "partition": "0"}
        return REGISTRY.get_sample_value("lakehouse_kafka_offsets_expired_total", labels) or 0.0

    producer.send(20)
    planner = Planner(click_settings.kafka.bootstrap, [click_settings.kafka.clicks_topic], 1000, policy)
    before = counted()
    try:
        beyond = {click_settings.kafka.clicks_topic: {0: 10_000_000}}
        if policy == "fail":
            with pytest.raises(OffsetsExpiredError, match="outside the broker's retained range"):
                planner.plan(beyond)
        else:
            ranges, _ = planner.plan(beyond)
            assert next(r for r in ranges if r.partition == 0).start == 0
            assert planner.expired_events
        assert counted() == before + 1
    finally:
        planner.close()


def test_the_planner_follows_the_tail_across_plans(click_settings, producer):
    """Each plan reaches the end written since the last one; a plan with nothing new plans nothing.

    The ends are Kafka's listed offsets: every record the producer had acknowledged is planned,
    and a plan on a topic with nothing new plans nothing.
    """
    from pipeline.kafka_source.planner import Planner

    topic = click_settings.kafka.clicks_topic
    planner = Planner(click_settings.kafka.bootstrap, [topic], 1000)
    try:
        producer.send(30)
        first, _ = planner.plan({})
        assert sum(r.end for r in first) == 30
        producer.send(30)
        second, marks = planner.plan({topic: {r.partition: r.end for r in first}})
        assert sum(r.end for r in second) == 60 == sum(wm.high for wm in marks.values())
        assert [r.start for r in second] == [r.end for r in first]
        third, _ = planner.plan({topic: {r.partition: r.end for r in second}})
        assert [r.size for r in third] == [0] * len(third)
    finally:
        planner.close()


def test_metrics_describe_the_batches(spark, click_settings, producer):
    from prometheus_client import REGISTRY

    producer.send(400, bad_share=0.05)
    job = ClickIngestJob(spark, click_settings)
    table = click_settings.catalog.clicks_table
    before = REGISTRY.get_sample_value("lakehouse_e2e_latency_seconds_count", {"table": table}) or 0
    valid_before = REGISTRY.get_sample_value("lakehouse_pipeline_rows_total", {"pipeline": "clicks", "stage": "valid"}) or 0

    def task_seconds(phase: str) -> float:
        return REGISTRY.get_sample_value("lakehouse_pipeline_task_phase_seconds_total",
                                         {"pipeline": "clicks", "phase": phase}) or 0.0

    phases = ("fetch", "transform", "write")
    spent_before = {phase: task_seconds(phase) for phase in phases}
    drain(job)
    job.close()
    spent = {phase: task_seconds(phase) - spent_before[phase] for phase in phases}
    assert all(seconds > 0 for seconds in spent.values()), spent  # every task reports where its time went
    valid = len(producer.sent.valid)
    assert REGISTRY.get_sample_value("lakehouse_e2e_latency_seconds_count", {"table": table}) - before == valid
    rows = REGISTRY.get_sample_value("lakehouse_pipeline_rows_total", {"pipeline": "clicks", "stage": "valid"})
    assert rows - valid_before == valid
    inf = REGISTRY.get_sample_value("lakehouse_e2e_latency_seconds_bucket", {"table": table, "le": "+Inf"})
    ten_min = REGISTRY.get_sample_value("lakehouse_e2e_latency_seconds_bucket", {"table": table, "le": "600.0"})
    assert inf == ten_min, "fresh events are all under 10 minutes"
    for p in range(3):
        lag = REGISTRY.get_sample_value("lakehouse_kafka_lag_records",
                                        {"pipeline": "clicks", "topic": click_settings.kafka.clicks_topic, "partition": str(p)})
        assert lag == 0
    assert REGISTRY.get_sample_value("lakehouse_table_last_commit_timestamp_seconds", {"table": table}) > 0


class _NeverStarts:
    """A job whose construction fails, as one does on a bad table or an unreachable service."""

    name = "never-starts"

    def __init__(self, spark, settings):
        raise FatalError("this job cannot start")


def test_a_job_that_cannot_start_stops_the_application_with_its_error(spark, click_settings, producer, monkeypatch):
    """Beside a running click job, a job failing in its constructor stops the whole application (not one
    thread dying quietly while the others go on) and its error is what the application raises."""
    import threading

    from pipeline.app import run_jobs
    from pipeline.jobs import JOBS, JobSpec

    monkeypatch.setitem(JOBS, _NeverStarts.name, JobSpec(
        _NeverStarts.name, f"{__name__}:_NeverStarts", trigger=lambda s: 1.0,
        port=lambda m: m.pipeline_port, pool_weight=lambda s: (1, 0)))
    producer.send(50)
    raised: list[BaseException] = []

    def app() -> None:
        try:
            run_jobs(spark, click_settings, ["clicks", _NeverStarts.name], threading.Event())
        except BaseException as exc:  # noqa: BLE001 - what the application raised is the finding
            raised.append(exc)

    thread = threading.Thread(target=app, daemon=True)
    thread.start()
    thread.join(180)
    assert not thread.is_alive(), "the click job went on without the job that could not start"
    assert len(raised) == 1 and "this job cannot start" in str(raised[0]), raised


def test_jobs_share_one_application_in_fair_pools(spark, click_settings, producer):
    import threading

    from pipeline.app import run_jobs

    producer.send(300)
    stop = threading.Event()
    app = threading.Thread(target=run_jobs, args=(spark, click_settings, ["clicks"], stop))
    app.start()
    try:
        import time

        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if spark.catalog.tableExists(click_settings.catalog.clicks_table) and \
                    spark.table(click_settings.catalog.clicks_table).count() >= 300:
                break
            time.sleep(1)
    finally:
        stop.set()
        app.join(120)
    assert spark.table(click_settings.catalog.clicks_table).count() == 300
    assert spark.sparkContext.getConf().get("spark.scheduler.mode") == "FAIR"
