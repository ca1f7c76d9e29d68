"""Spark with executor processes of their own on this machine (Spark's local-cluster mode), for fault and
placement tests."""

from __future__ import annotations

from pathlib import Path

import psutil
import pyspark

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


def spark_home(tmp_path: Path) -> Path:
    """PySpark's own Spark as SPARK_HOME, through links: the in-driver worker writes its executors' work
    directories under SPARK_HOME/work, which must not be the installed package."""
    home = tmp_path / "spark-home"
    home.mkdir()
    for entry in Path(pyspark.__file__).parent.iterdir():
        (home / entry.name).symlink_to(entry)
    return home
