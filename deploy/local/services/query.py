"""The SQL service (`queries.server`): the local stand-in for Trino's coordinator, a warm DuckDB on loopback."""

from __future__ import annotations

import json
import sys
import urllib.error
import urllib.request

from deploy.local.services.base import Service


class QueryService(Service):
    name = "query"
    startup_timeout = 60.0

    def ports(self) -> dict[str, int]:
        return {"query": self.settings.query.port}

    def command(self) -> list[str]:
        return [sys.executable, "-m", "queries.server"]

    def ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://{self.settings.query.address}/v1/info", timeout=2) as resp:
                return resp.status == 200 and json.loads(resp.read()).get("engine") == "duckdb"
        except (urllib.error.URLError, OSError, ValueError):
            return False
