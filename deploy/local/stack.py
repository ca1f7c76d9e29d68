"""The local stack: every lakehouse service as a real process on 127.0.0.1, in order.

``up`` checks everything it can before starting anything (programs present, ports
free, disk space), starts services in dependency order, waits for each to answer its own
protocol, then creates what the lakehouse needs inside it. If any step fails, the
services this call started are stopped again: no half-started stack is left behind.
"""

from __future__ import annotations

import fcntl
import shutil
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass

from tenacity import RetryError, Retrying, retry_if_result, stop_after_delay, wait_fixed

from deploy.local import processes
from deploy.local.credentials import ensure_credentials
from deploy.local.processes import StackError
from deploy.local.services.base import Service
from deploy.local.services.broker import Broker
from deploy.local.services.mariadb import MariaDB
from deploy.local.services.metastore import Metastore
from deploy.local.services.object_store import ObjectStore
from deploy.local.services.postgres import Postgres
from deploy.local.services.prometheus import Prometheus
from deploy.local.services.query import QueryService
from deploy.local.services.trino import Trino
from lakehouse.settings import Settings

#: dependency order: the metastore needs PostgreSQL; the SQL services read tables through the metastore and the
#: object store
SERVICE_TYPES: tuple[type[Service], ...] = (ObjectStore, Broker, Postgres, Metastore, MariaDB, Prometheus,
                                            QueryService, Trino)

Progress = Callable[[str], None]


@dataclass
class ServiceStatus:
    service: str
    pid: int | None
    port: int
    ready: bool
    memory_mb: float | None
    log: str
    on_demand: bool = False  # not started by `up`: not running is its normal state until first use

    def as_dict(self) -> dict:
        return asdict(self)


def _quiet(_: str) -> None:
    pass


class LocalStack:
    def __init__(self, settings: Settings):
        self.settings = settings

    def services(self) -> list[Service]:
        return [cls(self.settings) for cls in SERVICE_TYPES]

    def service(self, name: str) -> Service:
        for svc in self.services():
            if svc.name == name:
                return svc
        raise StackError(f"unknown service {name!r}; services: {', '.join(s.name for s in self.services())}")

    def _running(self, svc: Service) -> processes.ProcessRecord | None:
        record = processes.read_record(self.settings.run_dir, svc.name)
        return record if record and record.process() else None

    def _log_tail(self, svc: Service, lines: int = 15) -> str:
        if not svc.log_path.exists():
            return "(no log)"
        return "\n".join(svc.log_path.read_text(errors="replace").splitlines()[-lines:])

    def _wait_ready(self, svc: Service, record: processes.ProcessRecord) -> float:
        started = time.monotonic()

        def is_ready() -> bool:
            if record.process() is None:
                raise StackError(f"{svc.name} exited during start-up (log {svc.log_path}):\n{self._log_tail(svc)}")
            return svc.ready()

        retryer = Retrying(
            stop=stop_after_delay(svc.startup_timeout),
            wait=wait_fixed(0.3),
            retry=retry_if_result(lambda ok: not ok),
        )
        try:
            retryer(is_ready)
        except RetryError as exc:
            raise StackError(
                f"{svc.name} did not become ready within {svc.startup_timeout:.0f}s (log {svc.log_path}):\n"
                f"{self._log_tail(svc)}"
            ) from exc
        return time.monotonic() - started

    def up(self, progress: Progress = _quiet) -> dict[str, float]:
        """Start every service not already running; return seconds-to-ready per started service."""
        self.settings.run_dir.mkdir(parents=True, exist_ok=True)
        self.settings = ensure_credentials(self.settings)
        services = self.services()
        pending = [svc for svc in services if self._running(svc) is None and not svc.on_demand]
        for svc in pending:
            svc.check_binaries()
        ports: dict[str, int] = {}
        for svc in pending:
            ports.update(svc.ports())
        if pending:
            processes.check_free_disk(self.settings.run_dir, self.settings.pipeline.min_free_disk_mb)
        processes.check_ports_free(ports)
        user = processes.service_user() if any(s.needs_unprivileged_user for s in pending) else None

        timings: dict[str, float] = {}
        started: list[processes.ProcessRecord] = []
        try:
            for svc in services:
                if svc not in pending:
                    progress(f"{svc.name}: " + ("already running" if self._running(svc) else "starts on first use"))
                    continue
                progress(f"{svc.name}: starting on port {svc.main_port}")
                svc.data_dir.mkdir(parents=True, exist_ok=True)
                svc.prepare(user if svc.needs_unprivileged_user else None)
                record = processes.spawn(
                    svc.name, svc.command(), svc.log_path, self.settings.run_dir, env=svc.env(),
                    user=user if svc.needs_unprivileged_user else None, cwd=svc.data_dir,
                )
                started.append(record)
                timings[svc.name] = self._wait_ready(svc, record)
                svc.bootstrap()
                progress(f"{svc.name}: ready in {timings[svc.name]:.1f}s")
        except BaseException:
            for record in reversed(started):
                processes.stop(record)
                processes.forget(self.settings.run_dir, record.service)
            raise
        return timings

    def down(self, purge: bool = False, progress: Progress = _quiet) -> list[str]:
        """Stop the processes this stack started (reverse order); keep data unless purge."""
        stopped = []
        for svc in reversed(self.services()):
            record = processes.read_record(self.settings.run_dir, svc.name)
            if record is None:
                continue
            if processes.stop(record):
                stopped.append(svc.name)
                progress(f"{svc.name}: stopped (pid {record.pid})")
            processes.forget(self.settings.run_dir, svc.name)
        if purge and self.settings.run_dir.exists():
            shutil.rmtree(self.settings.run_dir)
            progress(f"purged {self.settings.run_dir}")
        return stopped

    def restart(self, name: str) -> float:
        """Stop and start one service, keeping its data (used by the durability and chaos tests)."""
        self.stop_service(name)
        return self.start_service(name)

    def stop_service(self, name: str) -> None:
        """Stop one service, keeping its data; the others keep running (an outage, for the chaos suite)."""
        self.service(name)  # a clear error for an unknown name
        record = processes.read_record(self.settings.run_dir, name)
        if record:
            processes.stop(record)

    def crash_service(self, name: str) -> None:
        """kill -9 one service (no chance to flush or close anything); its data stays as the crash left it."""
        self.service(name)
        record = processes.read_record(self.settings.run_dir, name)
        if record:
            processes.kill(record)

    def start_service(self, name: str) -> float:
        """Start one stopped service on its existing data; seconds until it is ready."""
        svc = self.service(name)
        user = processes.service_user() if svc.needs_unprivileged_user else None
        svc.data_dir.mkdir(parents=True, exist_ok=True)
        svc.prepare(user)
        record = processes.spawn(name, svc.command(), svc.log_path, self.settings.run_dir, env=svc.env(),
                                 user=user, cwd=svc.data_dir)
        took = self._wait_ready(svc, record)
        svc.bootstrap()
        return took

    def ensure(self, name: str, progress: Progress = _quiet) -> float:
        """Start ``name`` (an on-demand service) unless it runs already; seconds it took to start (0 when it ran).

        Two first uses at once (the demo and a `lakehouse trino`) must not start two servers: the check,
        the start and the wait hold a lock file of the service's. One that is running but still starting is
        waited for, so the caller gets a server that answers.
        """
        svc = self.service(name)
        lock_path = processes.pid_dir(self.settings.run_dir) / f"{name}.lock"
        lock_path.parent.mkdir(parents=True, exist_ok=True)
        with lock_path.open("w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if (running := self._running(svc)) is not None:
                self._wait_ready(svc, running)
                return 0.0
            processes.check_ports_free(svc.ports())
            svc.check_binaries()
            progress(f"{svc.name}: starting on port {svc.main_port}")
            try:
                took = self.start_service(name)
            except BaseException:
                if record := processes.read_record(self.settings.run_dir, name):
                    processes.stop(record)
                    processes.forget(self.settings.run_dir, name)
                raise
            progress(f"{svc.name}: ready in {took:.1f}s")
            return took

    def status(self) -> list[ServiceStatus]:
        rows = []
        for svc in self.services():
            record = self._running(svc)
            rows.append(
                ServiceStatus(
                    service=svc.name,
                    pid=record.pid if record else None,
                    port=svc.main_port,
                    ready=bool(record) and svc.ready(),
                    memory_mb=round(processes.rss_mb(record), 1) if record else None,
                    log=str(svc.log_path),
                    on_demand=svc.on_demand,
                )
            )
        return rows
