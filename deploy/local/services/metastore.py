"""Hive Metastore 2.3.9 (from pyspark's jars) on PostgreSQL: the catalog all engines share.

Two gaps of this old metastore are closed here:
- it has no filesystem for ``s3://`` and refuses to create databases there, so the
  ``s3`` scheme is mapped (ViewFileSystemOverloadScheme) onto a local folder: HMS only
  ever creates empty directories; table data goes through Iceberg's S3FileIO;
- it binds every interface, so it runs with the loopback bind shim preloaded.
"""

from __future__ import annotations

import logging
import os
import socket
from pathlib import Path
from xml.sax.saxutils import escape

from deploy.artifacts import SHIM_NAME
from deploy.local.binaries import java_binary, pyspark_jars
from deploy.local.processes import StackError
from deploy.local.services.base import Service
from lakehouse.settings import secret


class Metastore(Service):
    name = "metastore"
    startup_timeout = 120.0

    def ports(self) -> dict[str, int]:
        return {"metastore": self.settings.metastore.port}

    @property
    def postgres_jar(self) -> Path:
        jars = sorted((self.settings.tools_dir / "jars").glob("postgresql-*.jar"))
        if not jars:
            raise StackError("PostgreSQL JDBC jar missing from .tools/jars: run `make install`")
        return jars[-1]

    @property
    def shim(self) -> Path:
        path = self.settings.tools_dir / "lib" / SHIM_NAME
        if not path.exists():
            raise StackError(f"{path} missing: run `make install` (it compiles deploy/native/loopback_bind.c)")
        return path

    def hive_site(self) -> dict[str, str]:
        pg = self.settings.postgres
        fallback = (self.data_dir / "warehouse").as_uri()
        return {
            "javax.jdo.option.ConnectionURL": f"jdbc:postgresql://{pg.host}:{pg.port}/{pg.metastore_db}",
            "javax.jdo.option.ConnectionDriverName": "org.postgresql.Driver",
            "javax.jdo.option.ConnectionUserName": pg.user,
            "javax.jdo.option.ConnectionPassword": secret(pg.password, "postgres.password"),
            "datanucleus.schema.autoCreateAll": "true",
            "hive.metastore.schema.verification": "false",
            "hive.async.log.enabled": "false",
            "hive.metastore.warehouse.dir": self.settings.s3.warehouse,
            "fs.s3.impl": "org.apache.hadoop.fs.viewfs.ViewFileSystemOverloadScheme",
            "fs.viewfs.overload.scheme.target.file.impl": "org.apache.hadoop.fs.LocalFileSystem",
            f"fs.viewfs.mounttable.{self.settings.s3.warehouse_bucket}.linkFallback": fallback,
            "hive.metastore.event.db.notification.api.auth": "false",
        }

    def prepare(self, user: str | None) -> None:
        (self.data_dir / "warehouse").mkdir(parents=True, exist_ok=True)
        self.config_dir.mkdir(parents=True, exist_ok=True)
        props = "\n".join(
            f"  <property><name>{escape(k)}</name><value>{escape(v)}</value></property>"
            for k, v in self.hive_site().items()
        )
        path = self.config_dir / "hive-site.xml"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(f'<?xml version="1.0"?>\n<configuration>\n{props}\n</configuration>\n')

    def command(self) -> list[str]:
        classpath = os.pathsep.join([str(self.config_dir), f"{pyspark_jars()}/*", str(self.postgres_jar)])
        return [
            str(java_binary()),
            f"-Xmx{self.settings.metastore.heap_mb}m",
            "-XX:+UseSerialGC",
            "-Djava.net.preferIPv4Stack=true",
            f"-Dhive.log.dir={self.log_path.parent}",
            f"-Dhive.log.file={self.name}-hive.log",
            "-cp", classpath,
            "org.apache.hadoop.hive.metastore.HiveMetaStore",
            "-p", str(self.settings.metastore.port),
        ]

    def env(self) -> dict[str, str]:
        return {"LD_PRELOAD": str(self.shim)}

    def ready(self) -> bool:
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
