"""The Hive Metastore both runtimes run: Hive 2.3.10 from pyspark's jars, on PostgreSQL.

Spark 4.1's built-in Hive client and PyIceberg 0.12 call the metastore's ``get_table``,
which Hive 4 removed (HIVE-26537), so the catalog must be a Hive 2/3 metastore; the one
pyspark ships is the one the local suite tests. The local stack (``deploy/local/services/
metastore.py``) and the cluster (``python -m deploy.metastore`` in the project image,
``k8s/base/hive-metastore``) take its configuration and command line from here, so the
cluster runs the catalog the tests ran.

Its one gap: it has no filesystem for ``s3://`` and refuses to create databases there, so
the ``s3`` scheme is mapped (ViewFileSystemOverloadScheme) onto a scratch folder; the
metastore only ever creates empty directories, table data goes through Iceberg's S3FileIO.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from xml.sax.saxutils import escape

import psycopg

from deploy.local.binaries import java_binary, pyspark_jars
from deploy.maven import profile_dir
from lakehouse.settings import Settings, load_settings, secret

MAIN_CLASS = "org.apache.hadoop.hive.metastore.HiveMetaStore"
LOCK_TABLES_SQL = Path(__file__).resolve().parent / "metastore_locks.sql"


def ensure_lock_tables(settings: Settings, connect_timeout: int = 10) -> None:
    """The transaction tables Iceberg's commit locks need, in the metastore's database (idempotent)."""
    pg = settings.postgres
    with psycopg.connect(
        host=pg.host, port=pg.port, user=pg.user, dbname=pg.metastore_db, autocommit=True,
        password=secret(pg.password, "postgres.password"), connect_timeout=connect_timeout,
    ) as conn:  # fmt: skip
        conn.execute(LOCK_TABLES_SQL.read_text())


def site_properties(settings: Settings, password: str, scratch_uri: str) -> dict[str, str]:
    """hive-site.xml: ``password`` may be Hadoop's ``${env.NAME}`` (the cluster: read at start, never written)."""
    pg, s3 = settings.postgres, settings.s3
    return {
        "javax.jdo.option.ConnectionURL": f"jdbc:postgresql://{pg.host}:{pg.port}/{pg.metastore_db}",
        "javax.jdo.option.ConnectionDriverName": "org.postgresql.Driver",
        "javax.jdo.option.ConnectionUserName": pg.user,
        "javax.jdo.option.ConnectionPassword": password,
        "datanucleus.schema.autoCreateAll": "true",  # the schema, lock tables included, on first start
        # Hive's default pool, BoneCP, left Spark 4's jars; HikariCP is there (the lock calls failed without it)
        "datanucleus.connectionPoolingType": "HikariCP",
        "hive.metastore.schema.verification": "false",
        "hive.async.log.enabled": "false",
        "hive.metastore.warehouse.dir": s3.warehouse,
        "fs.s3.impl": "org.apache.hadoop.fs.viewfs.ViewFileSystemOverloadScheme",
        "fs.viewfs.overload.scheme.target.file.impl": "org.apache.hadoop.fs.LocalFileSystem",
        f"fs.viewfs.mounttable.{s3.warehouse_bucket}.linkFallback": scratch_uri,
        # A new database or table folder would take its parent's permissions, and the mapping's root
        # reports the read-only 555 of a mount point: a metastore that is not root (the cluster's, uid
        # 10001) could then create no folder below the first one. The umask decides instead.
        "hive.warehouse.subdir.inherit.perms": "false",
        "hive.metastore.event.db.notification.api.auth": "false",
    }


def site_xml(properties: dict[str, str], comment: str = "") -> str:
    body = "\n".join(f"  <property><name>{escape(k)}</name><value>{escape(v)}</value></property>"
                     for k, v in properties.items())
    head = f"<!-- {comment} -->\n" if comment else ""
    return f'<?xml version="1.0"?>\n{head}<configuration>\n{body}\n</configuration>\n'


def postgres_jar(settings: Settings) -> Path:
    folder = profile_dir(settings.tools_dir, "spark")
    jars = sorted(folder.glob("postgresql-*.jar"))
    if not jars:
        raise FileNotFoundError(f"PostgreSQL JDBC jar missing from {folder}: run `make install`")
    return jars[-1]


def command(settings: Settings, java: Path, conf_dir: Path, log_dir: Path) -> list[str]:
    """The metastore's command line: hive-site.xml from ``conf_dir``, Hive from pyspark's jars."""
    classpath = os.pathsep.join([str(conf_dir), f"{pyspark_jars()}/*", str(postgres_jar(settings))])
    return [str(java), f"-Xmx{settings.metastore.heap_mb}m", "-XX:+UseSerialGC", "-Djava.net.preferIPv4Stack=true",
            f"-Dhive.log.dir={log_dir}", "-Dhive.log.file=metastore-hive.log", "-cp", classpath,
            MAIN_CLASS, "-p", str(settings.metastore.port)]


def main() -> None:
    """The cluster's entry point: become the metastore (exec), configured by the mounted hive-site.xml."""
    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--conf-dir", type=Path, required=True, help="Folder holding hive-site.xml.")
    parser.add_argument("--log-dir", type=Path, default=Path("/tmp"), help="Folder for Hive's own log file.")
    args = parser.parse_args()
    settings = load_settings()
    ensure_lock_tables(settings)  # before the first commit can ask for a lock (an error here restarts the pod)
    argv = command(settings, java_binary(), args.conf_dir, args.log_dir)
    os.execv(argv[0], argv)


if __name__ == "__main__":
    main()
