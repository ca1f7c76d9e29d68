"""What every local service is: ports, a data dir, a command, a readiness probe, a bootstrap."""

from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path

from lakehouse.settings import Settings


class Service(ABC):
    """One real server of the local stack.

    Subclasses say how to initialise their data dir (idempotent), how to start, how to
    tell they are ready *on their own protocol*, and what to create once ready
    (buckets, topics, schemas) — also idempotent, so ``up`` after ``down`` is safe.
    """

    name: str
    #: seconds to wait for readiness before giving up
    startup_timeout: float = 60.0
    #: run as an unprivileged user when we are root (servers that refuse root)
    needs_unprivileged_user: bool = False
    #: left out of ``up``; started by the first command that needs it (``LocalStack.ensure``)
    on_demand: bool = False

    def __init__(self, settings: Settings):
        self.settings = settings

    @property
    def data_dir(self) -> Path:
        return self.settings.run_dir / "data" / self.name

    @property
    def config_dir(self) -> Path:
        return self.settings.run_dir / "config" / self.name

    @property
    def log_path(self) -> Path:
        return self.settings.run_dir / "logs" / f"{self.name}.log"

    @abstractmethod
    def ports(self) -> dict[str, int]:
        """Ports this service listens on (checked free before start)."""

    @property
    def main_port(self) -> int:
        return next(iter(self.ports().values()))

    def check_binaries(self) -> None:
        """Raise StackError naming any missing program (called before anything starts)."""
        self.command()

    def prepare(self, user: str | None) -> None:  # noqa: B027 - a hook: most services need nothing prepared
        """Create/initialise the data and config dirs (must be idempotent)."""

    @abstractmethod
    def command(self) -> list[str]:
        """The server's command line."""

    def env(self) -> dict[str, str]:
        return {}

    @abstractmethod
    def ready(self) -> bool:
        """True once the server answers a real request of its protocol."""

    def bootstrap(self) -> None:  # noqa: B027 - a hook: not every service holds lakehouse objects
        """Create what the lakehouse needs inside the service (idempotent)."""
