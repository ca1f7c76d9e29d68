"""The one retry policy (``lakehouse.errors.Backoff``): what it waits, when it starts counting again, and what ends it."""

from __future__ import annotations

import threading
import time

import pytest

from lakehouse.errors import Backoff, FatalError


class _Pauses(threading.Event):
    """A stop event whose waits are recorded and return at once, so the schedule is seen without sleeping it."""

    def __init__(self):
        super().__init__()
        self.pauses: list[float] = []

    def wait(self, timeout=None) -> bool:
        self.pauses.append(timeout)
        return self.is_set()


def _failing(backoff: Backoff, failures: int, before=lambda n: None) -> int:
    """Attempts under ``backoff`` until one succeeds: the first ``failures`` raise a connection error."""
    attempts = 0
    for attempt in backoff:
        with attempt:
            attempts += 1
            before(attempts)
            if attempts <= failures:
                raise ConnectionError("broker away")
    return attempts


def test_pauses_double_up_to_the_longest_and_each_is_reported_first():
    stop, reported = _Pauses(), []
    attempts = _failing(Backoff(stop, lambda error, pause: reported.append((str(error), pause)), longest=10), 5)
    assert attempts == 6
    assert stop.pauses == [2, 4, 8, 10, 10]
    assert reported == [("broker away", p) for p in stop.pauses]


def test_an_attempt_that_ran_healthy_long_starts_the_count_again():
    stop = _Pauses()
    _failing(Backoff(stop, lambda *_: None, healthy=0.05), 4, before=lambda n: time.sleep(0.1) if n == 3 else None)
    assert stop.pauses == [2, 4, 2, 4]


def test_a_fatal_error_is_raised_at_once():
    stop, attempts = _Pauses(), []
    with pytest.raises(FatalError, match="cannot follow"):
        for attempt in Backoff(stop, lambda *_: None):
            with attempt:
                attempts.append(1)
                raise FatalError("DDL the capture cannot follow")
    assert (attempts, stop.pauses) == ([1], [])


def test_a_stop_ends_the_attempts_without_an_error():
    stop = _Pauses()

    def stopped_then_failed(n: int) -> None:
        stop.set()

    assert _failing(Backoff(stop, lambda *_: None), 3, before=stopped_then_failed) == 1
    assert stop.pauses == [], "no pause, no further attempt once stopped"
