"""Commits announced inside one process: a job that reads a table starts its batch when the job writing that
table commits, rather than at its next trigger.

`lakehouse run pipeline` runs the click ingestion and the live aggregates in one Spark application, one
driver process: the aggregates read the click table's new snapshots, and a batch started at the click
commit does not wait up to a trigger interval first. A reader in another process (`lakehouse run
aggregate` alone) hears nothing and polls at its trigger, as before: the trigger stays the longest wait.
"""

from __future__ import annotations

import threading

_lock = threading.Lock()
_events: dict[str, threading.Event] = {}


def committed(table: str) -> threading.Event:
    """The event set each time ``table`` commits in this process (a reader clears it when it starts reading)."""
    with _lock:
        return _events.setdefault(table, threading.Event())


def announce(table: str) -> None:
    """``table`` committed a snapshot: wake the readers waiting for it."""
    committed(table).set()
