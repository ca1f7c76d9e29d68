"""A measurement with a time limit: run in a child process, stopped at the limit, reported as such.

A reader can take minutes on a table it reads badly (DuckDB counting a table of ten million
equality deletes had not finished after three minutes and grew to 8 GB); a benchmark that waits
for it never finishes. The call runs in a process of its own (``spawn``: nothing of the parent's
threads, Spark gateway or connections is inherited), so it can be stopped at any point and its
memory goes with it; the answer comes back through a pipe.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any

#: seconds one reader's measurement may take before it is stopped
READ_LIMIT_S = 120.0


class Stopped(str):
    """Why no answer came: the limit was reached, or the call failed or died (the text says which)."""


def _answer(pipe: Connection, call: Callable[..., Any], args: tuple) -> None:
    try:
        result = call(*args)
    except Exception as exc:  # noqa: BLE001 - sent to the parent, which reports it
        result = Stopped(f"failed: {type(exc).__name__}: {(str(exc).splitlines() or [''])[0][:200]}")
    pipe.send(result)
    pipe.close()


def within_limit(call: Callable[..., Any], *args: Any, limit_s: float = READ_LIMIT_S) -> Any:
    """``call(*args)`` in a child process: its result, or a :class:`Stopped` saying why there is none.

    ``call`` is a module-level function and ``args`` and its result pickle (they cross processes).
    """
    context = multiprocessing.get_context("spawn")
    receiving, sending = context.Pipe(duplex=False)
    child = context.Process(target=_answer, args=(sending, call, args), daemon=True)
    child.start()
    sending.close()
    try:
        if receiving.poll(limit_s):
            try:
                return receiving.recv()
            except EOFError:
                child.join(10)
                return Stopped(f"the measuring process ended without an answer (exit code {child.exitcode})")
        return Stopped(f"did not finish within {limit_s:.0f} s (stopped)")
    finally:
        if child.is_alive():
            child.kill()
        child.join(10)
        receiving.close()
