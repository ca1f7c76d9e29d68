"""A benchmark's reader measurement is stopped at its limit and says so; an answer in time comes back whole.

Real child processes (``spawn``) and a real DuckDB query that would run for minutes.
"""

from __future__ import annotations

import os
import time

from lab.time_limit import Stopped, within_limit


def _answer(rows: int) -> dict:
    return {"rows": rows, "pid": os.getpid()}


def _duckdb_count_of_a_trillion_rows() -> int:
    import duckdb

    return duckdb.connect().execute("SELECT count(*) FROM range(1000000000000) t(i) WHERE i % 7 = 3").fetchone()[0]


def _fails() -> None:
    raise ValueError("PyIceberg does not yet support equality deletes")


def _dies() -> None:
    os._exit(9)


def test_an_answer_in_time_comes_back_from_a_process_of_its_own():
    answer = within_limit(_answer, 42, limit_s=60)
    assert answer["rows"] == 42 and answer["pid"] != os.getpid()


def test_a_reader_query_that_runs_past_the_limit_is_stopped_and_reported():
    began = time.monotonic()
    answer = within_limit(_duckdb_count_of_a_trillion_rows, limit_s=3)
    assert isinstance(answer, Stopped) and answer == "did not finish within 3 s (stopped)"
    assert time.monotonic() - began < 30


def test_a_failing_reader_says_why_and_a_dead_one_says_it_died():
    failed = within_limit(_fails, limit_s=60)
    assert isinstance(failed, Stopped) and "ValueError: PyIceberg does not yet support equality deletes" in failed
    died = within_limit(_dies, limit_s=60)
    assert isinstance(died, Stopped) and "exit code 9" in died
