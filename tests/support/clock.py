"""A virtual clock for code that waits: ``clock()`` reads it, ``clock.sleep(s)`` moves it on at once."""

from __future__ import annotations


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds
