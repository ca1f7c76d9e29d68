"""CPU seconds used by a process tree: which process took the cores in a soak window.

A window's freshness moves with who else was running; wall seconds per maintenance action
(the soak's ``compact_s``) miss what the maintenance JVM burns between actions (health
reads, garbage collection, planning), so the soak also diffs CPU time of the writer's and
the maintenance service's process trees, and of the broker: found by the port it listens on,
since it may be the stack's process rather than the soak's child.
"""

from __future__ import annotations

from collections.abc import Callable

import psutil


def _own_seconds(process: psutil.Process, reaped_children: bool) -> float:
    times = process.cpu_times()
    return times.user + times.system + (times.children_user + times.children_system if reaped_children else 0.0)


def tree_cpu_seconds(pid: int) -> float:
    """User + system CPU of ``pid`` and every descendant, living or already reaped (0 once ``pid`` is gone)."""
    try:
        root = psutil.Process(pid)
        processes = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return 0.0
    total = 0.0
    for process in processes:
        try:
            total += _own_seconds(process, reaped_children=True)
        except psutil.NoSuchProcess:
            continue  # ended between the listing and the read: its time moved to its parent's reaped share
    return total


def process_cpu_seconds(pid: int | None = None) -> float:
    """User + system CPU of one process alone (default: this one), not its children."""
    return _own_seconds(psutil.Process(pid), reaped_children=False)


def listening_pid(port: int) -> int | None:
    """The process listening on TCP ``port`` (any local address), or None when none is (or it is not ours to see)."""
    try:
        connections = psutil.net_connections(kind="tcp")
    except psutil.AccessDenied:
        return None
    return next((c.pid for c in connections
                 if c.status == psutil.CONN_LISTEN and c.laddr and c.laddr.port == port and c.pid), None)


class CpuMeter:
    """CPU seconds each named part of a system used between ``start`` and ``stop``.

    ``parts`` maps a name to a function returning that part's CPU seconds so far (a process,
    its tree, a service found by its port): a benchmark reports what its run cost, per
    process group, beside what it achieved. A part whose process is gone reads 0 from then on.
    """

    def __init__(self, parts: dict[str, Callable[[], float]]):
        self.parts = parts
        self._began: dict[str, float] = {}

    def _read(self) -> dict[str, float]:
        out = {}
        for name, read in self.parts.items():
            try:
                out[name] = read()
            except psutil.Error:
                out[name] = 0.0
        return out

    def start(self) -> None:
        self._began = self._read()

    def stop(self) -> dict[str, float]:
        now = self._read()
        return {name: max(0.0, now[name] - self._began.get(name, 0.0)) for name in now}


def service_cpu(port: int) -> Callable[[], float]:
    """CPU seconds so far of the process tree listening on ``port`` (0 when none does)."""
    def read() -> float:
        pid = listening_pid(port)
        return tree_cpu_seconds(pid) if pid else 0.0
    return read
