"""Hive Metastore 2.3.10 (from pyspark's jars) on PostgreSQL: the catalog all engines share.

Its configuration and command line are the cluster's too (``deploy/metastore.py``). Locally
it binds every interface, so it runs with the loopback bind shim preloaded.
"""

from __future__ import annotations

import logging
import os
import socket
from pathlib import Path

from deploy.artifacts import SHIM_NAME
from deploy.local.binaries import java_binary
from deploy.local.processes import StackError
from deploy.local.services.base import Service
from deploy.metastore import command, site_properties, site_xml
from lakehouse.settings import secret


class Metastore(Service):
    name = "metastore"
    startup_timeout = 120.0

    def ports(self) -> dict[str, int]:
        return {"metastore": self.settings.metastore.port}

    @property
    def shim(self) -> Path:
        path = self.settings.tools_dir / "lib" / SHIM_NAME
        if not path.exists():
            raise StackError(f"{path} missing: run `make install` (it compiles deploy/native/loopback_bind.c)")
        return path

    def hive_site(self) -> dict[str, str]:
        password = secret(self.settings.postgres.password, "postgres.password")
        return site_properties(self.settings, password, (self.data_dir / "warehouse").as_uri())

    def prepare(self, user: str | None) -> None:
        (self.data_dir / "warehouse").mkdir(parents=True, exist_ok=True)
        self.config_dir.mkdir(parents=True, exist_ok=True)
        path = self.config_dir / "hive-site.xml"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(site_xml(self.hive_site()))

    def command(self) -> list[str]:
        try:
            return command(self.settings, java_binary(), self.config_dir, self.log_path.parent)
        except FileNotFoundError as exc:
            raise StackError(str(exc)) from None

    def env(self) -> dict[str, str]:
        return {"LD_PRELOAD": str(self.shim)}

    def ready(self) -> bool:
        # deferred: pyiceberg loads pyarrow: only for the readiness probe
        from pyiceberg.catalog.hive import HiveCatalog

        m = self.settings.metastore
        try:  # a closed port is "not yet", said quietly (thrift logs every refused connect as an ERROR)
            socket.create_connection((m.host, m.port), timeout=1).close()
        except OSError:
            return False
        thrift_log = logging.getLogger("thrift.transport.TSocket")
        level = thrift_log.level
        thrift_log.setLevel(logging.CRITICAL)
        try:
            HiveCatalog("probe", uri=m.uri).list_namespaces()
            return True
        except Exception:  # noqa: BLE001 - any failure means "not ready yet"
            return False
        finally:
            thrift_log.setLevel(level)
