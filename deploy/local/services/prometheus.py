"""Prometheus, scraping the stack's exporters, with the lakehouse's recording and alert rules (all from settings)."""

from __future__ import annotations

import urllib.error
import urllib.request

from deploy import prometheus_rules
from deploy.local.binaries import system_binary
from deploy.local.services.base import Service
from deploy.prometheus_config import RULES_FILE, render


class Prometheus(Service):
    name = "prometheus"
    startup_timeout = 30.0

    def ports(self) -> dict[str, int]:
        return {"prometheus": self.settings.prometheus.port}

    @property
    def config_file(self):
        return self.config_dir / "prometheus.yml"

    def prepare(self, user: str | None) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.config_dir.mkdir(parents=True, exist_ok=True)
        self.config_file.write_text(render(self.settings))
        (self.config_dir / RULES_FILE).write_text(prometheus_rules.render(self.settings))

    def command(self) -> list[str]:
        return [
            str(system_binary("prometheus", "prometheus")),
            f"--config.file={self.config_file}",
            f"--storage.tsdb.path={self.data_dir}",
            f"--web.listen-address={self.settings.prometheus.address}",
            "--web.enable-lifecycle",
            "--storage.tsdb.retention.time=2d",
            "--log.level=warn",
        ]

    def ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://{self.settings.prometheus.address}/-/ready", timeout=2) as resp:
                return resp.status == 200
        except (urllib.error.URLError, OSError):
            return False
