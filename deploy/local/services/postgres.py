"""PostgreSQL: the Hive Metastore's database."""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path

import psycopg

from deploy.local.binaries import postgres_bin_dir
from deploy.local.processes import chown_for
from deploy.local.services.base import Service
from deploy.metastore import ensure_lock_tables
from lakehouse.errors import LakehouseError
from lakehouse.settings import Settings, secret


def connect(settings: Settings, dbname: str = "postgres", timeout: int = 3) -> psycopg.Connection:
    pg = settings.postgres
    return psycopg.connect(
        host=pg.host, port=pg.port, user=pg.user, dbname=dbname,
        password=secret(pg.password, "postgres.password"), connect_timeout=timeout, autocommit=True,
    )


class Postgres(Service):
    name = "postgres"
    startup_timeout = 30.0
    needs_unprivileged_user = True

    def ports(self) -> dict[str, int]:
        return {"postgres": self.settings.postgres.port}

    @property
    def pgdata(self) -> Path:
        return self.data_dir / "pgdata"

    def prepare(self, user: str | None) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        chown_for(self.data_dir, user)
        if (self.pgdata / "PG_VERSION").exists():
            return

        with tempfile.NamedTemporaryFile("w", dir=self.data_dir, delete=False) as pw:
            pw.write(secret(self.settings.postgres.password, "postgres.password"))
        chown_for(Path(pw.name), user)
        try:
            subprocess.run(
                [str(postgres_bin_dir() / "initdb"), "-D", str(self.pgdata), "-U", self.settings.postgres.user,
                 "--auth=scram-sha-256", f"--pwfile={pw.name}", "--encoding=UTF8", "--no-instructions"],
                check=True, user=user, capture_output=True, text=True,
            )
        except subprocess.CalledProcessError as exc:
            raise LakehouseError(f"initdb failed: {exc.stderr.strip()}") from exc
        finally:
            os.unlink(pw.name)

    def command(self) -> list[str]:
        pg = self.settings.postgres
        return [
            str(postgres_bin_dir() / "postgres"), "-D", str(self.pgdata),
            "-h", pg.host, "-p", str(pg.port), "-k", str(self.data_dir),
            "-c", "shared_buffers=32MB", "-c", "max_connections=60",
        ]

    def ready(self) -> bool:
        try:
            with connect(self.settings, timeout=2) as conn:
                return conn.execute("SELECT 1").fetchone() == (1,)
        except psycopg.OperationalError:
            return False

    def bootstrap(self) -> None:
        db = self.settings.postgres.metastore_db
        with connect(self.settings) as conn:
            if conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (db,)).fetchone() is None:
                conn.execute(f'CREATE DATABASE "{db}"')
        ensure_lock_tables(self.settings)
