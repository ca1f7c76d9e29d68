"""Hold a total event rate, whatever the number of users and processes.

Each process owns one ``Pacer``. Users ask it for permission to send up to a batch of
events; it grants what the rate profile allows since the start (a token bucket that
integrates the target rate over time). In distributed mode the master tells every
worker its share (1/workers), so the sum over processes is the target rate.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

RateProfile = Callable[[float], float]  # seconds since start -> events/s (total, all processes)


class Pacer:
    def __init__(self, profile: RateProfile, share: float = 1.0, burst_seconds: float = 0.2):
        self.profile = profile
        self.share = share
        self.burst_seconds = burst_seconds
        self._lock = threading.Lock()
        self._start: float | None = None
        self._last = 0.0
        self._allowance = 0.0
        self.granted = 0

    def set_share(self, share: float) -> None:
        with self._lock:
            self.share = share

    def elapsed(self) -> float:
        return 0.0 if self._start is None else time.monotonic() - self._start

    def take(self, max_events: int) -> int:
        """How many events the caller may send now (0 = wait a little)."""
        with self._lock:
            now = time.monotonic()
            if self._start is None:
                self._start = self._last = now
            rate = max(0.0, self.profile(now - self._start)) * self.share
            self._allowance = min(self._allowance + rate * (now - self._last), max(1.0, rate * self.burst_seconds))
            self._last = now
            grant = min(max_events, int(self._allowance))
            self._allowance -= grant
            self.granted += grant
            return grant
