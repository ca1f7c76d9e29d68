"""Spark with executor processes of their own on this machine (Spark's local-cluster mode), for fault and
placement tests."""

from __future__ import annotations

import psutil

#: two executors of one core each, processes of their own, launched by an in-driver standalone worker
TWO_EXECUTORS = "local-cluster[2,1,1024]"


def executors(pid: int) -> list[psutil.Process]:
    """The executor JVMs the aggregate process's driver launched."""
    found = []
    for process in psutil.Process(pid).children(recursive=True):
        try:
            if "CoarseGrainedExecutorBackend" in " ".join(process.cmdline()):
                found.append(process)
        except psutil.Error:  # ended meanwhile (a zombie until its parent reaps it)
            continue
    return found
