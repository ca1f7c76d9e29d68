"""CPU seconds used by a process tree, and the peak memory of processes: which process took the cores in a soak
window, and how much memory each part of a benchmark held.

A window's freshness moves with who else was running; wall seconds per maintenance action
(the soak's ``compact_s``) miss what the maintenance JVM burns between actions (health
reads, garbage collection, planning), so the soak also diffs CPU time of the writer's and
the maintenance service's process trees, and of the broker: found by the port it listens on,
since it may be the stack's process rather than the soak's child.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Mapping

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


def pss_bytes(pid: int) -> int:
    """The process's proportional set size: its resident pages, each shared page divided among the processes
    that map it. Summed over processes it counts every page once, as a container's memory limit does; summed
    RSS counts a page once per process (a Python worker forked from Spark's daemon shares its modules)."""
    with open(f"/proc/{pid}/smaps_rollup", encoding="ascii") as rollup:
        for line in rollup:
            if line.startswith("Pss:"):
                return int(line.split()[1]) * 1024
    return 0


class PeakRss:
    """The highest resident memory each watched part reached, sampled twice a second. ``pids()`` names each
    part's process, or its processes (their RSS summed at each sample: a pool of Python workers). With
    ``pss``, also the peak of their summed PSS (``pss_bytes``), in ``pss_peak_mb()``."""

    def __init__(self, pids: Callable[[], Mapping[str, int | list[int]]], pss: bool = False):
        self.pids, self.peak = pids, {name: 0 for name in pids()}
        self.pss, self.pss_peak = pss, {name: 0 for name in self.peak}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.5):
            for name, pids in self.pids().items():
                total = proportional = 0
                for pid in pids if isinstance(pids, list) else [pids]:
                    try:
                        total += psutil.Process(pid).memory_info().rss
                        proportional += pss_bytes(pid) if self.pss else 0
                    except (psutil.NoSuchProcess, OSError):
                        pass
                self.peak[name] = max(self.peak.get(name, 0), total)
                self.pss_peak[name] = max(self.pss_peak.get(name, 0), proportional)

    def stop(self) -> dict[str, float]:
        self._stop.set()
        self._thread.join()
        return {name: rss / 2**20 for name, rss in self.peak.items()}

    def pss_peak_mb(self) -> dict[str, float]:
        return {name: pss / 2**20 for name, pss in self.pss_peak.items()}


def python_workers(jvm_pid: int, module: str = "pipeline.python_daemon") -> list[int]:
    """The Spark JVM's Python worker processes (its daemon and the workers it forked)."""
    try:
        children = psutil.Process(jvm_pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []
    out = []
    for child in children:
        try:
            if module in " ".join(child.cmdline()):
                out.append(child.pid)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return out


def tree_pids(pid: int) -> list[int]:
    """``pid`` and its descendants (the CDC apply reads Kafka in a child of its own): a part's processes."""
    try:
        return [pid, *(child.pid for child in psutil.Process(pid).children(recursive=True))]
    except psutil.NoSuchProcess:
        return [pid]


def spark_parts(pid: int) -> dict[str, list[int]]:
    """A Spark application's process tree by part: "driver" (the Python driver, its JVM and their other children)
    and "executor N" (each executor JVM launched for it, as in local-cluster mode, with its Python workers)."""
    try:
        children = psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return {"driver": [pid]}
    parts: dict[str, list[int]] = {}
    inside: set[int] = set()
    for child in children:
        try:
            command = child.cmdline()
            if "CoarseGrainedExecutorBackend" in " ".join(command):
                executor = command[command.index("--executor-id") + 1] if "--executor-id" in command else str(child.pid)
                tree = [child.pid, *(c.pid for c in child.children(recursive=True))]
                parts[f"executor {executor}"] = tree
                inside.update(tree)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return {"driver": [pid, *(c.pid for c in children if c.pid not in inside)], **dict(sorted(parts.items()))}


def tree_peak_rss_mb(pid: int) -> float:
    """The peaks (``peak_rss_mb``) of ``pid`` and its descendants, summed: at most what they held at once. A
    descendant that ended between the listing and the reading (a Spark executor's short-lived helpers) counts
    nothing; NaN only when no peak could be read at all."""
    peaks = [peak for peak in (peak_rss_mb(p) for p in tree_pids(pid)) if not math.isnan(peak)]
    return sum(peaks) if peaks else float("nan")


def peak_rss_mb(pid: int) -> float:
    """The highest resident memory ``pid`` has had since it started (the kernel's ``VmHWM``), in MiB: a peak a
    sampler could miss between two samples. NaN where the kernel does not keep it (not Linux)."""
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")
