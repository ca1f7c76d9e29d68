"""The check under faults decides on the click table's exact growth and bounds every wait.

No cluster here (the run itself is `make faults-node`, its figures in docs/kubernetes.md): its
verdict and its recovery wait are run on the answers a cluster would give, on a virtual clock.
"""

from __future__ import annotations

import pytest

from deploy.k8s.end_to_end import CheckFailed, Limits
from deploy.k8s.faults import exact, settled_count, wait_for
from tests.support.clock import Clock


def test_exactly_the_delivered_events_pass():
    assert exact(before=1_000, after=31_000, delivered=30_000) == ""


def test_a_lost_event_fails_and_says_how_many():
    assert "2 lost" in exact(before=1_000, after=30_998, delivered=30_000)


def test_a_duplicated_batch_fails_and_says_how_many():
    assert "500 duplicated" in exact(before=1_000, after=31_500, delivered=30_000)


def test_recovery_is_timed_and_a_kubectl_failure_on_the_way_is_retried():
    clock, answers = Clock(), [CheckFailed("connection refused"), False, True]

    def ready() -> bool:
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    assert wait_for("a new executor", ready, 60, sleep=clock.sleep, clock=clock) == 4


def test_a_pod_that_never_comes_back_fails_the_check_naming_the_last_error():
    clock = Clock()

    def ready() -> bool:
        raise CheckFailed("pods is forbidden")

    with pytest.raises(CheckFailed, match="a new executor: not within 30 s.*forbidden"):
        wait_for("a new executor", ready, 30, sleep=clock.sleep, clock=clock)


def test_the_starting_count_waits_for_an_earlier_load_to_land_and_retries_a_failed_count():
    clock, counts = Clock(), [100, 250, CheckFailed("Trino restarting"), 400, 400]

    def count() -> int:
        answer = counts.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    assert settled_count(count, Limits(table_wait_s=300, interval_s=5), sleep=clock.sleep, clock=clock) == 400


def test_a_count_that_keeps_growing_fails_the_check_instead_of_starting_from_it():
    clock, rows = Clock(), iter(range(0, 10**6, 100))
    with pytest.raises(CheckFailed, match="did not settle"):
        settled_count(lambda: next(rows), Limits(table_wait_s=60, interval_s=5), sleep=clock.sleep, clock=clock)
