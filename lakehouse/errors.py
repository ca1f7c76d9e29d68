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
  retried the same way.
"""

from __future__ import annotations


class LakehouseError(Exception):
    """A problem the project explains: the message says what happened and what to do."""


class FatalError(LakehouseError):
    """An error no retry can fix: the job stops with this message."""


class TransientError(LakehouseError):
    """A fault the job outlives: it waits, reloads where its tables stand and tries the batch again."""


def retried(exc: BaseException) -> bool:
    """The one retry rule of the jobs and the capture: everything but a ``FatalError`` (and Ctrl-C)."""
    return isinstance(exc, Exception) and not isinstance(exc, FatalError)
