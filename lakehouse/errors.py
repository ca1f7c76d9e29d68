"""The one distinction every job's loop makes: errors a retry can fix, and errors it cannot.

A streaming job retries a failed batch from its committed offsets (the broker or the object
store was away, a commit lost a race). Some errors come back however often it retries: records
lost from Kafka, a change record that breaks the contract, DDL the capture cannot follow. Those
are ``FatalError``: the loop stops the job with the error's message, which says what happened
and what to do. ``TransientError`` names the project's own "try again" faults; an exception of
a library (a refused connection, a lost commit race) counts as transient unless it is fatal.
"""

from __future__ import annotations


class FatalError(Exception):
    """An error no retry can fix: the job stops with this message."""


class TransientError(Exception):
    """A fault the job outlives: it waits, reloads where its tables stand and tries the batch again."""
