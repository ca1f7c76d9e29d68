"""Dead letters on real Kafka, S3, metastore and Spark: written once, after their batch's click commit, and
read again after a crash between the two commits (the click table's dead-done offsets say where from)."""

from __future__ import annotations

import time

import pytest

from pipeline.clicks.job import ClickIngestJob
from pipeline.kafka_source.offsets import decode
from pipeline.snapshot_properties import latest_property
from pipeline.tables import DEAD_DONE_PROPERTY
from tests.support.clicks import drain, rows


class StopsBeforeDeadLetters(ClickIngestJob):
    """A job that dies between a batch's click commit and its dead-letter commit (the crash window)."""

    def _commit_dead_letters(self, parsed, target, topic_ids):
        raise RuntimeError("killed between the two commits")



def test_dead_letters_of_a_batch_cut_short_are_written_on_recovery(spark, click_settings, producer):
    producer.send(800, bad_share=0.05)
    crashing = StopsBeforeDeadLetters(spark, click_settings)
    assert crashing.run_once() > 0  # the click commit; its dead letters fail in the background ...
    with pytest.raises(RuntimeError, match="between the two commits"):
        crashing.close()  # ... which the job reports when it is next asked to settle (a batch, or closing)
    clicks, dead_table = click_settings.catalog.clicks_table, click_settings.catalog.dead_letter_table
    assert len(rows(spark, clicks)) == len(producer.sent.valid), "the click commit landed"
    assert len(rows(spark, dead_table)) == 0, "its dead letters did not"

    first_valid = len(producer.sent.valid)
    producer.send(400, bad_share=0.05)
    again = StopsBeforeDeadLetters(spark, click_settings)
    try:  # the catch-up fails too: the batch fails before committing anything, so nothing is claimed done
        with pytest.raises(RuntimeError, match="between the two commits"):
            again.run_once()
    finally:
        again.close()
    assert len(rows(spark, clicks)) == first_valid and len(rows(spark, dead_table)) == 0
    job = ClickIngestJob(spark, click_settings)
    try:
        job.run_once()  # its first batch writes the missing dead letters before anything else
        assert len(rows(spark, dead_table)) > 0
        drain(job)
        job.recover()  # nothing is missing now: the catch-up after a second recovery writes nothing again
        assert job.run_once() == 0
    finally:
        job.close()
    ids = [r.event_id for r in rows(spark, clicks)]
    assert len(ids) == len(set(ids)) and set(ids) == set(producer.sent.valid)
    dead = rows(spark, dead_table)
    assert sorted(bytes(r.raw) for r in dead) == sorted(producer.sent.bad)
    assert len({(r.kafka_partition, r.kafka_offset) for r in dead}) == len(dead)


class SlowDeadLetters(ClickIngestJob):
    """Dead-letter commits that take 3 s: the next batch commits while they are in flight."""

    def _commit_dead_letters(self, parsed, target, topic_ids):
        time.sleep(3)
        return super()._commit_dead_letters(parsed, target, topic_ids)


def test_a_click_commit_claims_dead_letters_done_only_up_to_the_batch_still_in_flight(spark, click_settings,
                                                                                        producer):
    clicks, dead_table = click_settings.catalog.clicks_table, click_settings.catalog.dead_letter_table
    click_settings.pipeline.dead_letter_seconds = 0  # each batch's dead letters committed after it
    producer.send(300, bad_share=0.1)
    job = SlowDeadLetters(spark, click_settings)
    try:
        first_start = job.committed
        assert job.run_once() > 0  # batch 1: clicks committed, its dead letters now take 3 s in the background
        producer.send(300, bad_share=0.1)
        assert job.run_once() > 0  # batch 2 commits while they are in flight ...
        claimed = decode(latest_property(spark, clicks, DEAD_DONE_PROPERTY))
        # ... so it claims only what was done before batch 1 began, not batch 2's start
        assert all(claimed.get(t, {}).get(p, 0) == first_start.get(t, {}).get(p, 0)
                   for t, parts in claimed.items() for p in parts), (claimed, first_start)
        assert claimed != job.committed
    finally:
        job.close()  # waits for both dead-letter commits, in order
    dead = rows(spark, dead_table)
    assert sorted(bytes(r.raw) for r in dead) == sorted(producer.sent.bad)
    assert len({(r.kafka_partition, r.kafka_offset) for r in dead}) == len(dead)
    restarted = ClickIngestJob(spark, click_settings)  # the catch-up re-reads both batches and writes nothing twice
    try:
        assert restarted.run_once() == 0
    finally:
        restarted.close()
    assert len(rows(spark, dead_table)) == len(dead)


def test_the_dead_letters_of_several_batches_go_in_one_commit_and_a_crash_reads_them_again(spark, click_settings,
                                                                                             producer):
    clicks, dead_table = click_settings.catalog.clicks_table, click_settings.catalog.dead_letter_table
    click_settings.pipeline.dead_letter_seconds = 3600  # owed until the job closes
    crashing = StopsBeforeDeadLetters(spark, click_settings)
    first_start = crashing.committed
    for _ in range(3):
        producer.send(300, bad_share=0.1)
        assert crashing.run_once() > 0
    assert len(rows(spark, clicks)) == len(producer.sent.valid) and len(rows(spark, dead_table)) == 0
    claimed = decode(latest_property(spark, clicks, DEAD_DONE_PROPERTY))  # the oldest owed batch's start
    assert all(claimed.get(t, {}).get(p, 0) == first_start.get(t, {}).get(p, 0)
               for t, parts in claimed.items() for p in parts), (claimed, first_start)
    with pytest.raises(RuntimeError, match="between the two commits"):
        crashing.close()  # closing commits what is owed: here that commit dies

    click_settings.pipeline.dead_letter_seconds = 1
    job = ClickIngestJob(spark, click_settings)
    try:
        assert job.run_once() == 0  # the catch-up reads the three batches again and writes their dead letters
        assert sorted(bytes(r.raw) for r in rows(spark, dead_table)) == sorted(producer.sent.bad)
        commits = spark.table(f"{dead_table}.snapshots").count()
        producer.send(300, bad_share=0.1)
        assert job.run_once() > 0
        deadline = time.monotonic() + 30  # an idle stream's owed dead letters are committed once due
        while time.monotonic() < deadline and len(rows(spark, dead_table)) < len(producer.sent.bad):
            assert job.run_once() == 0
            time.sleep(0.2)
        assert sorted(bytes(r.raw) for r in rows(spark, dead_table)) == sorted(producer.sent.bad)
        assert spark.table(f"{dead_table}.snapshots").count() == commits + 1
    finally:
        job.close()

    click_settings.pipeline.dead_letter_seconds = 3600  # three batches owed, then one commit when the job closes
    job = ClickIngestJob(spark, click_settings)
    try:
        for _ in range(3):
            producer.send(300, bad_share=0.1)
            assert job.run_once() > 0
        assert spark.table(f"{dead_table}.snapshots").count() == commits + 1
    finally:
        job.close()
    assert spark.table(f"{dead_table}.snapshots").count() == commits + 2
    dead = rows(spark, dead_table)
    assert sorted(bytes(r.raw) for r in dead) == sorted(producer.sent.bad)
    assert len({(r.kafka_partition, r.kafka_offset) for r in dead}) == len(dead)


class FailsOnce(ClickIngestJob):
    """A dead-letter commit that fails once, while later batches' dead letters wait."""

    failed = False

    def _commit_dead_letters(self, parsed, target, topic_ids):
        if not FailsOnce.failed:
            FailsOnce.failed = True
            time.sleep(1)  # still in flight when the next batches commit and owe theirs
            raise RuntimeError("the metastore went away")
        return super()._commit_dead_letters(parsed, target, topic_ids)


def test_a_failed_dead_letter_commit_leaves_no_later_one_to_skip_its_batches(spark, click_settings, producer):
    """The failure surfaces while later batches are owed; closing then must not commit those (their offsets would
    move the dead-letter table past the failed batch's), so the next start writes all of them."""
    clicks, dead_table = click_settings.catalog.clicks_table, click_settings.catalog.dead_letter_table
    click_settings.pipeline.dead_letter_seconds = 0  # a commit per batch: the failure is met by the next one's
    job = FailsOnce(spark, click_settings)
    try:
        producer.send(300, bad_share=0.1)
        assert job.run_once() > 0  # its dead letters' commit fails in the background, a second later
        with pytest.raises(RuntimeError, match="went away"):
            for _ in range(3):
                producer.send(300, bad_share=0.1)
                job.run_once()  # a later batch meets the failure once it is due: after its own click commit
                time.sleep(1.2)
    finally:
        job.close()  # what was owed when the failure came is not committed
    assert len(rows(spark, dead_table)) == 0
    again = ClickIngestJob(spark, click_settings)
    try:
        drain(again)
    finally:
        again.close()
    dead = rows(spark, dead_table)
    assert sorted(bytes(r.raw) for r in dead) == sorted(producer.sent.bad)
    assert len({(r.kafka_partition, r.kafka_offset) for r in dead}) == len(dead)
    assert {r.event_id for r in rows(spark, clicks)} == set(producer.sent.valid)
