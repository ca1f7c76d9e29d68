"""`make up`'s end-to-end check decides on what it saw: a count that fails is a failure, never a pass.

No cluster here: the check's waiting logic is run with counting functions that answer as Trino
would in each case (the table not there yet, a failure, a partial count), on a virtual clock.
"""

from __future__ import annotations

import pytest

from deploy.k8s.end_to_end import CheckFailed, Limits, parse_delivered, wait_for_table, wait_until_counted


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def answers(*script):
    """A count that gives each scripted answer in turn (an exception is raised), then the last one forever."""
    items = list(script)

    def count() -> int:
        item = items.pop(0) if len(items) > 1 else items[0]
        if isinstance(item, Exception):
            raise item
        return item

    return count


LIMITS = Limits(table_wait_s=60, count_wait_s=60, interval_s=5, failures_in_a_row=3)


def test_a_failing_count_fails_the_check_instead_of_passing_it():
    clock = Clock()
    failing = answers(100, CheckFailed("Trino: connection refused"))
    with pytest.raises(CheckFailed, match="3 times in a row"):
        wait_until_counted(failing, before=100, delivered=50, limits=LIMITS, sleep=clock.sleep, clock=clock)


def test_a_single_failed_count_is_retried():
    clock = Clock()
    flaky = answers(CheckFailed("OOM-killed CLI"), 120, 150)
    assert wait_until_counted(flaky, before=100, delivered=50, limits=LIMITS, sleep=clock.sleep, clock=clock) == 10


def test_a_partial_count_times_out_naming_what_was_counted():
    clock = Clock()
    with pytest.raises(CheckFailed, match="counts 30 of the 50 delivered events"):
        wait_until_counted(answers(130), before=100, delivered=50, limits=LIMITS, sleep=clock.sleep, clock=clock)


def test_the_click_table_is_waited_for_until_it_exists():
    clock = Clock()
    missing = CheckFailed("Table 'iceberg.ods_behavior.clickevent' does not exist")
    assert wait_for_table(answers(missing, missing, 0), LIMITS, sleep=clock.sleep, clock=clock) == 0
    assert clock.now == 10
    later = Clock()
    with pytest.raises(CheckFailed, match="could not count the click table for 60 s"):
        wait_for_table(answers(missing), LIMITS, sleep=later.sleep, clock=later)


def test_the_delivered_figure_is_read_from_the_load_output():
    out = "swarm started\n  stopped: 0 events/s\ndelivered 6,012 events (the end offsets of clickevents moved ...)\n"
    assert parse_delivered(out) == 6012
    with pytest.raises(CheckFailed, match="no delivered figure"):
        parse_delivered("swarm started\n")
