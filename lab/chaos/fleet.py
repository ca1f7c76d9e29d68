"""The pipeline's long-running processes, each `lakehouse run <job>`, under a supervisor.

The supervisor plays the part of Kubernetes' restartPolicy Always (or systemd): a
process that exits, killed or crashed, is started again after a short pause. It counts
restarts, so the chaos table can tell "recovered by itself" from "restarted".
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

log = logging.getLogger(__name__)

# Process name in the chaos table -> `lakehouse run` arguments: the processes Kubernetes runs, the
# pipeline's Spark jobs in one application (its SparkApplication's arguments) and the binlog capture.
JOBS: dict[str, list[str]] = {
    "pipeline": ["pipeline", "--jobs", "clicks,dims,aggregate,maintain"],
    "cdc": ["cdc"],
}


@dataclass
class Member:
    name: str
    args: list[str]
    log_path: Path
    proc: subprocess.Popen | None = None
    crashes: int = 0  # exits nobody asked for
    kills: int = 0  # kill -9 by the chaos suite
    exit_codes: list[int] = field(default_factory=list)


class Fleet:
    def __init__(self, env: dict[str, str], log_dir: Path, jobs: dict[str, list[str]] | None = None,
                 restart_delay: float = 2.0):
        self.env, self.restart_delay = env, restart_delay
        log_dir.mkdir(parents=True, exist_ok=True)
        self.members = {name: Member(name, args, log_dir / f"{name}.log") for name, args in (jobs or JOBS).items()}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._supervisor = threading.Thread(target=self._supervise, name="fleet-supervisor", daemon=True)

    def start(self) -> Fleet:
        for member in self.members.values():
            self._spawn(member)
        self._supervisor.start()
        return self

    def _spawn(self, member: Member) -> None:
        with member.log_path.open("ab") as out:
            member.proc = subprocess.Popen(
                [sys.executable, "-m", "cli", "run", *member.args, "--log-level", "info"],
                env=self.env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)

    def kill(self, name: str) -> None:
        """kill -9 the job's whole process group (driver JVM and Python workers alike)."""
        member = self.members[name]
        with self._lock:
            member.kills += 1
            os.killpg(member.proc.pid, signal.SIGKILL)
            member.proc.wait()
            member.exit_codes.append(member.proc.returncode)
            time.sleep(self.restart_delay)
            self._spawn(member)

    def _supervise(self) -> None:
        while not self._stop.wait(1.0):
            with self._lock:
                for member in self.members.values():
                    code = member.proc.poll()
                    if code is not None and not self._stop.is_set():
                        member.crashes += 1
                        member.exit_codes.append(code)
                        log.warning("%s exited with %s; restarting it (log %s)", member.name, code, member.log_path)
                        self._spawn(member)

    def crashes(self) -> dict[str, int]:
        return {name: m.crashes for name, m in self.members.items()}

    def stop(self, timeout: float = 90.0) -> None:
        """SIGTERM every job (each finishes its batch in flight), SIGKILL what is left after ``timeout``."""
        self._stop.set()
        self._supervisor.join()
        for member in self.members.values():
            if member.proc and member.proc.poll() is None:
                os.killpg(member.proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        for member in self.members.values():
            try:
                member.proc.wait(max(1.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                os.killpg(member.proc.pid, signal.SIGKILL)
                member.proc.wait()
