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
        """Ready once the coordinator has finished starting *and* its catalog can run a table scan.

        Two gaps come after ``"starting": false``. The node first registers itself for work: a
        query in that gap failed with "No nodes available to run query". Then the coordinator's
        node manager learns which catalogs the node serves, on its next poll of the announcements
        (every few seconds): until then ``SELECT 1`` and metadata queries (``USE``,
        ``information_schema``) answer, yet any scan of an ``iceberg`` table fails with that same
        error. So readiness ends with a scan of one of the catalog's tables, the way the seed
        session's ``select * from clickevent`` reads.
        """
        try:
            with urllib.request.urlopen(f"http://{self.settings.trino.address}/v1/info", timeout=2) as resp:
                if resp.status != 200 or json.loads(resp.read()).get("starting") is not False:
                    return False
        except (urllib.error.URLError, OSError, ValueError):
            return False
        return self._catalog_scans()

    def _catalog_scans(self) -> bool:
        # deferred: the trino client, needed only once the server is up
        import trino

        t, catalog = self.settings.trino, self.settings.catalog.trino_catalog
        try:
            with trino.dbapi.connect(host=t.host, port=t.port, user=t.user, http_scheme="http",
                                     request_timeout=5) as conn:
                cursor = conn.cursor()
                cursor.execute("SELECT 1")
                if cursor.fetchall() != [[1]]:
                    return False
                table = _a_table(cursor, catalog, self.settings.catalog.clicks_table)
                if table is None:
                    return True  # an empty catalog: no table a session could read yet
                cursor.execute(f"SELECT 1 FROM {table} LIMIT 1")
                cursor.fetchall()
                return True
        except Exception:  # noqa: BLE001 - any failure here means "not yet"; the caller waits and says so
            return False


def _a_table(cursor, catalog: str, preferred: str) -> str | None:
    """A table of ``catalog`` to scan, quoted: ``preferred`` (``namespace.table``) when it exists, else any.

    Metadata queries answer from the coordinator before the catalog's node is known, so they
    can pick the table; the connector's own ``system`` schema is served the same way, so it
    is no test.
    """
    namespace, name = preferred.split(".")
    tables = f"{catalog}.information_schema.tables"
    cursor.execute(f"SELECT table_schema, table_name FROM {tables} "
                   f"WHERE table_schema = '{namespace}' AND table_name = '{name}'")
    rows = cursor.fetchall()
    if not rows:
        cursor.execute(f"SELECT table_schema, table_name FROM {tables} WHERE table_schema NOT IN "
                       "('information_schema', 'system') AND table_type = 'BASE TABLE' LIMIT 1")
        rows = cursor.fetchall()
    return f'{catalog}."{rows[0][0]}"."{rows[0][1]}"' if rows else None


def cli_command(settings: Settings, args: list[str], interactive: bool) -> list[str]:
    """The Trino CLI's command line: the server, catalog and user from the settings, then ``args``."""
    jar = trino_cli_jar(settings.tools_dir)
    if not jar.is_file():
        raise FileNotFoundError(f"{jar} is missing: run `make install`")
    quiet = [] if interactive else ["-Dorg.jline.terminal.dumb=true"]  # no "dumb terminal" warning in pipes
    return [str(java_binary()), "-Xmx256m", *quiet, "-jar", str(jar),
            f"--server=http://{settings.trino.address}", f"--catalog={settings.catalog.trino_catalog}",
            f"--user={settings.trino.user}", *args]
