"""The project's one fault policy: which errors the user is told about, and which a retry can fix.

- ``LakehouseError`` is every problem the project explains itself: its message says what
  happened and what to do (a service that is not up, a missing artifact, a bad setting). The
  command line shows it as one line, ``error: …``, exit code 1, never a traceback; anything
  else is a bug and keeps its traceback.
- Inside a long-running job or the capture, the one retry rule (``retried``): every error is
  retried from the last commit or checkpoint, with a growing pause, except a ``FatalError``.
  A fatal error comes back however often the job retries (records lost from Kafka, a change
  record that breaks the contract, DDL the capture cannot follow, a table holding a key
  twice): the job stops with its message. ``TransientError`` names the project's own "try
  again" faults; a library's exception (a refused connection, a lost commit race) is
  retried the same way. ``Backoff`` is the one retry loop that applies it (tenacity).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator

from tenacity import AttemptManager, RetryCallState, Retrying, retry_if_exception


class LakehouseError(Exception):
    """A problem the project explains: the message says what happened and what to do."""


class FatalError(LakehouseError):
    """An error no retry can fix: the job stops with this message."""


class TransientError(LakehouseError):
    """A fault the job outlives: it waits, reloads where its tables stand and tries the batch again."""


def retried(exc: BaseException) -> bool:
    """The one retry rule of the jobs and the capture: everything but a ``FatalError`` (and Ctrl-C)."""
    return isinstance(exc, Exception) and not isinstance(exc, FatalError)


class Backoff:
    """The one retry policy of the long-running jobs and the capture, on tenacity's ``Retrying``.

    An error ``retried`` allows is tried again after a growing pause (2, 4, 8, 16 s, then
    ``longest``); an attempt that ran ``healthy`` seconds before it failed starts the count again,
    so a capture that streamed for hours pauses 2 s after a broker restart, not ``longest``.
    ``on_retry(error, pause)`` runs before each pause (to log, to reset a producer). ``stop``
    (Ctrl-C, SIGTERM) cuts a pause short and ends the attempts: the iteration then ends without a
    successful attempt, which the caller reads as "stopped". A ``FatalError`` is raised at once.

        for attempt in Backoff(stop, on_retry):
            with attempt:
                ...
    """

    def __init__(self, stop: threading.Event, on_retry: Callable[[BaseException, float], None],
                 longest: float = 30.0, healthy: float = 60.0):
        self.stop, self.on_retry, self.longest, self.healthy = stop, on_retry, longest, healthy
        self._failures, self._began = 0, 0.0

    def __iter__(self) -> Iterator[AttemptManager]:
        try:
            for attempt in Retrying(retry=retry_if_exception(retried), wait=self._pause, sleep=self._sleep,
                                    stop=lambda _state: self.stop.is_set(), before=self._begin,
                                    before_sleep=self._report, reraise=True):
                if self.stop.is_set():
                    return
                yield attempt
        except Exception as exc:
            if self.stop.is_set() and retried(exc):
                return  # stopped while failing: the caller stops too
            raise

    def _sleep(self, seconds: float) -> None:
        self.stop.wait(seconds)  # a stop ends the pause at once

    def _begin(self, _state: RetryCallState) -> None:
        self._began = time.monotonic()

    def _pause(self, _state: RetryCallState) -> float:
        ran = time.monotonic() - self._began
        self._failures = 1 if ran > self.healthy else min(self._failures + 1, 10)
        return min(self.longest, 2.0 ** self._failures)

    def _report(self, state: RetryCallState) -> None:
        assert state.outcome is not None and state.next_action is not None  # tenacity sets both before a pause
        error = state.outcome.exception()
        assert error is not None  # only a failed attempt pauses
        self.on_retry(error, state.next_action.sleep)
