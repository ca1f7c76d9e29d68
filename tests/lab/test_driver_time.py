"""The driver's timers: per function and thread, per window, and gone after the run."""

from __future__ import annotations

import threading
import time

from lab.bench.driver_time import TIMED, Timings


class Work:
    def slow(self, seconds: float) -> float:
        time.sleep(seconds)
        return seconds

    @staticmethod
    def fixed() -> str:
        return "fixed"


def test_windows_count_calls_and_time_per_thread_and_the_wrappers_come_off():
    timings = Timings()
    timings.wrap(Work, "slow", "slow")
    timings.wrap(Work, "fixed", "fixed")
    assert Work().slow(0.05) == 0.05 and Work.fixed() == "fixed"  # the wrapped functions still answer
    worker = threading.Thread(target=lambda: Work().slow(0.02), name="background_1")
    worker.start()
    worker.join()
    first = {(line.label, line.thread): line for line in timings.window()}
    assert first[("slow", "MainThread")].calls == 1 and first[("slow", "MainThread")].seconds >= 0.05
    assert first[("slow", "background")].calls == 1 and 0.02 <= first[("slow", "background")].mean_ms / 1000 < 0.05
    assert first[("fixed", "MainThread")].calls == 1
    Work().slow(0.01)
    second = timings.window()  # only what happened since the first window
    assert [(line.label, line.calls) for line in second] == [("slow", 1)]
    assert timings.window() == []
    timings.restore()
    assert "timed" not in repr(Work.__dict__["slow"]) and isinstance(Work.__dict__["fixed"], staticmethod)
    Work().slow(0.0)
    assert timings.window() == []


def test_every_timed_function_exists_where_the_tool_looks_for_it():
    for owner, name, _ in TIMED:
        assert name in owner.__dict__, f"{owner.__name__}.{name} moved: lab/bench/driver_time.py times nothing there"
