"""Start, find and stop the local stack's processes, and check their ports.

Every process the stack starts is recorded (pid + process start time) in
``<run_dir>/pids/<service>.json``. ``down`` stops exactly those processes: a pid
reused by an unrelated process after a reboot has another start time and is left alone.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import psutil

from lakehouse.errors import LakehouseError


class StackError(LakehouseError):
    """A problem the user can fix; the message says what is wrong and how to fix it."""


@dataclass
class ProcessRecord:
    service: str
    pid: int
    create_time: float
    command: list[str]
    log: str

    def process(self) -> psutil.Process | None:
        """The live process this record describes, or None if it is gone (or the pid was reused)."""
        try:
            proc = psutil.Process(self.pid)
            if abs(proc.create_time() - self.create_time) > 1.0 or proc.status() == psutil.STATUS_ZOMBIE:
                return None
            return proc
        except psutil.NoSuchProcess:
            return None


def pid_dir(run_dir: Path) -> Path:
    return run_dir / "pids"


def read_record(run_dir: Path, service: str) -> ProcessRecord | None:
    path = pid_dir(run_dir) / f"{service}.json"
    if not path.exists():
        return None
    return ProcessRecord(**json.loads(path.read_text()))


def write_record(run_dir: Path, record: ProcessRecord) -> None:
    pid_dir(run_dir).mkdir(parents=True, exist_ok=True)
    (pid_dir(run_dir) / f"{record.service}.json").write_text(json.dumps(asdict(record), indent=2))


def forget(run_dir: Path, service: str) -> None:
    (pid_dir(run_dir) / f"{service}.json").unlink(missing_ok=True)


def service_user() -> str | None:
    """The unprivileged user to run database servers as when we are root (they refuse root)."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        try:
            pwd.getpwnam(name)
            return name
        except KeyError:
            continue
    raise StackError("running as root but no unprivileged user (postgres) exists: `make install` installs postgresql")


def chown_for(path: Path, user: str | None) -> None:
    """Give a data directory to the user a server runs as (who must be able to reach it)."""
    if user is None:
        return
    for parent in path.resolve().parents:
        if not parent.stat().st_mode & 0o001:
            raise StackError(
                f"{path} is inside {parent}, which user {user!r} cannot enter (mode "
                f"{oct(parent.stat().st_mode & 0o777)}); database servers run as {user!r} when the stack is "
                "started as root. Put the run directory elsewhere with LAKEHOUSE_RUN_DIR."
            )
    entry = pwd.getpwnam(user)
    os.chown(path, entry.pw_uid, entry.pw_gid)
    for root, dirs, files in os.walk(path):
        os.chown(root, entry.pw_uid, entry.pw_gid)
        for name in dirs + files:
            os.chown(os.path.join(root, name), entry.pw_uid, entry.pw_gid, follow_symlinks=False)


def spawn(
    service: str,
    command: list[str],
    log: Path,
    run_dir: Path,
    env: dict[str, str] | None = None,
    user: str | None = None,
    cwd: Path | None = None,
) -> ProcessRecord:
    """Start a server in its own session (so Ctrl-C in the terminal does not reach it)."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as out:
        out.write(f"\n=== {time.strftime('%Y-%m-%d %H:%M:%S')} starting {service}\n".encode())
        out.flush()
        proc = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, **(env or {})},
            cwd=cwd,
            user=user,
            start_new_session=True,
        )
    record = ProcessRecord(service, proc.pid, psutil.Process(proc.pid).create_time(), command, str(log))
    write_record(run_dir, record)
    return record


def stop(record: ProcessRecord, timeout: float = 20.0, first: signal.Signals = signal.SIGTERM) -> bool:
    """``first`` (SIGTERM), then SIGKILL after ``timeout``, to the process and its children; True if one was alive."""
    proc = record.process()
    if proc is None:
        return False
    family = [proc] + proc.children(recursive=True)
    for p in family:
        try:
            p.send_signal(first)
        except psutil.NoSuchProcess:
            pass
    _, alive = psutil.wait_procs(family, timeout=timeout)
    for p in alive:
        try:
            p.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(alive, timeout=5)
    return True


def kill(record: ProcessRecord) -> bool:
    """kill -9 of the process and its children at once (a crash, for the chaos suite); True if one was alive."""
    return stop(record, timeout=10.0, first=signal.SIGKILL)


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nothing listens on right now, for a process of a test, benchmark or soak."""
    with socket.socket() as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def port_holder(port: int) -> str | None:
    """Who listens on a TCP port, as 'name (pid N)', or None when the port is free."""
    try:
        conns = psutil.net_connections(kind="tcp")
    except psutil.AccessDenied:
        conns = []
    for conn in conns:
        if conn.status == psutil.CONN_LISTEN and conn.laddr and conn.laddr.port == port:
            if conn.pid is None:
                return "another process (pid hidden: run as its owner to see it)"
            try:
                return f"{psutil.Process(conn.pid).name()} (pid {conn.pid})"
            except psutil.NoSuchProcess:
                return f"pid {conn.pid}"
    return None


def check_ports_free(ports: dict[str, int]) -> None:
    """Refuse to start when any port is taken, naming each holder and the setting to change."""
    problems = []
    for name, port in ports.items():
        holder = port_holder(port)
        if holder:
            problems.append(f"port {port} ({name}) is in use by {holder}")
    if problems:
        raise StackError(
            "cannot start the local stack:\n  - " + "\n  - ".join(problems) + "\n"
            "Stop that process, or pick other ports, e.g. LAKEHOUSE_KAFKA__PORT=29092 "
            "(see `lakehouse config show` for every port setting)."
        )


def check_free_disk(path: Path, floor_mb: int) -> None:
    """Refuse to start on a nearly full disk: the object store would answer 500s, the writers wait.

    The stack keeps its object store, broker log and databases under ``path``; the floor is
    the one the writers hold to (``pipeline.min_free_disk_mb``), below which they start no batch.
    """
    probe = path if path.exists() else Path(path.anchor or "/")
    free_mb = shutil.disk_usage(probe).free / 2**20
    if free_mb < floor_mb:
        raise StackError(
            f"cannot start the local stack: only {free_mb:,.0f} MiB free on the disk of {path}, below "
            f"pipeline.min_free_disk_mb={floor_mb:,} (the writers would start no batch).\n"
            "Free disk space there (`lakehouse stack down --purge` removes an old stack's data), put the "
            "run directory on a larger disk (LAKEHOUSE_RUN_DIR), or lower LAKEHOUSE_PIPELINE__MIN_FREE_DISK_MB."
        )


def rss_mb(record: ProcessRecord | None) -> float | None:
    """Resident memory of a process and its children, in MiB."""
    proc = record.process() if record else None
    if proc is None:
        return None
    total = 0
    for p in [proc] + proc.children(recursive=True):
        try:
            total += p.memory_info().rss
        except psutil.NoSuchProcess:
            pass
    return total / (1 << 20)
