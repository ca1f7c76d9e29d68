"""Trino 476, the card's SQL engine, as a local server: one node on 127.0.0.1 with the ``iceberg`` catalog.

The server comes from Maven Central (``trino-server-core`` plus the Iceberg plugin, unpacked
by ``make install``) and runs on a JDK 24+ (Trino 476's floor), found by
``java_home_at_least``. Its catalog file is the one the cluster's coordinator mounts
(``deploy.trino_config``). It starts on first use unless ``trino.start=always``: see
docs/local-stack.md for the start time and memory that decided it.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request

from deploy.local.binaries import java_binary, java_home_at_least
from deploy.local.processes import StackError
from deploy.local.services.base import Service
from deploy.maven import trino_cli_jar, trino_home
from deploy.trino_config import catalog_file_name, iceberg_catalog, local_server
from lakehouse.settings import Settings, secret

TRINO_MIN_JAVA = 24


class Trino(Service):
    name = "trino"
    startup_timeout = 120.0

    @property
    def on_demand(self) -> bool:
        return self.settings.trino.start == "on-demand"

    def ports(self) -> dict[str, int]:
        return {"trino": self.settings.trino.port}

    @property
    def java_home(self):
        return java_home_at_least(TRINO_MIN_JAVA, self.settings.trino.java_home, "Trino 476")

    def prepare(self, user: str | None) -> None:
        """Write the server's config folder from the settings (every start: a changed port takes effect)."""
        catalogs = self.config_dir / "catalog"
        catalogs.mkdir(parents=True, exist_ok=True)
        for name, text in local_server(self.settings, str(self.data_dir)).items():
            (self.config_dir / name).write_text(text)
        (catalogs / catalog_file_name(self.settings)).write_text(iceberg_catalog(self.settings))

    def command(self) -> list[str]:
        launcher = trino_home(self.settings.tools_dir) / "bin" / "launcher"
        if not launcher.exists():
            raise StackError(f"{launcher} is missing: run `make install` (it unpacks Trino 476 from Maven Central)")
        self.java_home  # noqa: B018 - a missing JDK 24+ is named before anything starts
        return [str(launcher), "run", f"--etc-dir={self.config_dir}", f"--data-dir={self.data_dir}"]

    def env(self) -> dict[str, str]:
        s3, home = self.settings.s3, self.java_home
        return {
            "JAVA_HOME": str(home),
            "PATH": f"{home / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
            "LAKEHOUSE_S3__ACCESS_KEY": secret(s3.access_key, "s3.access_key"),
            "LAKEHOUSE_S3__SECRET_KEY": secret(s3.secret_key, "s3.secret_key"),
        }

    def ready(self) -> bool:
        """Ready once the coordinator has finished starting *and* answers a query.

        "starting": false comes a few seconds before the node has registered itself for work:
        a query in that gap failed with "No nodes available to run query" (seen on first use).
        """
        try:
            with urllib.request.urlopen(f"http://{self.settings.trino.address}/v1/info", timeout=2) as resp:
                if resp.status != 200 or json.loads(resp.read()).get("starting") is not False:
                    return False
        except (urllib.error.URLError, OSError, ValueError):
            return False
        return self._answers()

    def _answers(self) -> bool:
        # deferred: the trino client, needed only once the server is up
        import trino

        t = self.settings.trino
        try:
            with trino.dbapi.connect(host=t.host, port=t.port, user=t.user, http_scheme="http",
                                     request_timeout=5) as conn:
                cursor = conn.cursor()
                cursor.execute("SELECT 1")
                return cursor.fetchall() == [[1]]
        except Exception:  # noqa: BLE001 - any failure here means "not yet"; the caller waits and says so
            return False


def cli_command(settings: Settings, args: list[str], interactive: bool) -> list[str]:
    """The Trino CLI's command line: the server, catalog and user from the settings, then ``args``."""
    jar = trino_cli_jar(settings.tools_dir)
    if not jar.is_file():
        raise FileNotFoundError(f"{jar} is missing: run `make install`")
    quiet = [] if interactive else ["-Dorg.jline.terminal.dumb=true"]  # no "dumb terminal" warning in pipes
    return [str(java_binary()), "-Xmx256m", *quiet, "-jar", str(jar),
            f"--server=http://{settings.trino.address}", f"--catalog={settings.catalog.trino_catalog}",
            f"--user={settings.trino.user}", *args]
