"""MariaDB with a row binlog: the MySQL-compatible source database of the local stack."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pymysql

from deploy.local.binaries import system_binary
from deploy.local.processes import chown_for
from deploy.local.services.base import Service
from lakehouse.errors import LakehouseError
from lakehouse.settings import Settings, secret
from lakehouse.source_database import connect, open_connection

SCHEMA_SQL = Path(__file__).resolve().parent.parent / "sql" / "shop_schema.sql"
_SBIN = ("/usr/sbin",)


def apply_schema(cur, database: str) -> None:
    """Create the seed tables and rows in a database (idempotent)."""
    cur.execute(f"USE `{database}`")
    for sql in SCHEMA_SQL.read_text().split(";"):
        body = "\n".join(line for line in sql.splitlines() if not line.strip().startswith("--")).strip()
        if body:
            cur.execute(body)


def create_source_database(settings: Settings, database: str) -> None:
    """A new seeded database the app user may change (benchmarks and tests use their own)."""
    m = settings.mariadb
    with connect(settings) as conn, conn.cursor() as cur:
        cur.execute(f"CREATE DATABASE IF NOT EXISTS `{database}`")
        cur.execute(f"GRANT SELECT, INSERT, UPDATE, DELETE, ALTER ON `{database}`.* TO '{m.app_user}'@'127.0.0.1'")
        apply_schema(cur, database)


class MariaDB(Service):
    name = "mariadb"
    startup_timeout = 60.0
    needs_unprivileged_user = True

    def ports(self) -> dict[str, int]:
        return {"mariadb": self.settings.mariadb.port}

    @property
    def defaults_file(self) -> Path:
        return self.config_dir / "my.cnf"

    @property
    def socket(self) -> Path:
        return self.data_dir / "mariadb.sock"

    def prepare(self, user: str | None) -> None:
        m = self.settings.mariadb
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.config_dir.mkdir(parents=True, exist_ok=True)
        datadir = self.data_dir / "db"
        self.defaults_file.write_text(
            "[mysqld]\n"
            f"datadir={datadir}\nport={m.port}\nbind-address={m.host}\nsocket={self.socket}\n"
            f"pid-file={self.data_dir / 'mariadb.pid'}\n"
            f"server_id={m.server_id}\nlog_bin={self.data_dir / 'db' / 'binlog'}\n"
            + m.binlog_config_lines() +
            "expire_logs_days=7\ngtid_strict_mode=ON\n"
            f"innodb_buffer_pool_size={m.buffer_pool_mb}M\nperformance_schema=OFF\nskip-name-resolve\n"
            "character-set-server=utf8mb4\ncollation-server=utf8mb4_general_ci\n"
            "default-time-zone='+00:00'\n"
        )
        self.defaults_file.chmod(0o644)
        chown_for(self.data_dir, user)
        if (datadir / "mysql").exists():
            return
        result = subprocess.run(
            [str(system_binary("mariadb-install-db", "mariadb-server")), f"--defaults-file={self.defaults_file}",
             "--auth-root-authentication-method=normal", "--skip-test-db"],
            user=user, capture_output=True, text=True,
        )
        if result.returncode != 0:
            raise LakehouseError(f"mariadb-install-db failed: {result.stdout[-400:]}{result.stderr[-800:]}")

    def command(self) -> list[str]:
        return [str(system_binary("mariadbd", "mariadb-server", _SBIN)), f"--defaults-file={self.defaults_file}"]

    def _socket_root(self):
        return open_connection(unix_socket=str(self.socket), user="root", password="", timeout=2)

    def ready(self) -> bool:
        for attempt in (lambda: connect(self.settings, timeout=2), self._socket_root):
            try:
                with attempt() as conn, conn.cursor() as cur:
                    cur.execute("SELECT 1")
                    return cur.fetchone() == (1,)
            except pymysql.err.OperationalError:
                continue
        return False

    def bootstrap(self) -> None:
        m = self.settings.mariadb
        try:
            conn = connect(self.settings)
        except pymysql.err.OperationalError:
            conn = self._socket_root()  # first start: root has no password yet
        root_pw = secret(m.root_password, "mariadb.root_password")
        cdc_pw = secret(m.cdc_password, "mariadb.cdc_password")
        app_pw = secret(m.app_password, "mariadb.app_password")
        statements = [
            "CREATE USER IF NOT EXISTS 'root'@'127.0.0.1' IDENTIFIED BY %(root)s",
            "ALTER USER 'root'@'127.0.0.1' IDENTIFIED BY %(root)s",
            "GRANT ALL PRIVILEGES ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION",
            "ALTER USER 'root'@'localhost' IDENTIFIED BY %(root)s",
            f"CREATE USER IF NOT EXISTS '{m.cdc_user}'@'127.0.0.1' IDENTIFIED BY %(cdc)s",
            f"ALTER USER '{m.cdc_user}'@'127.0.0.1' IDENTIFIED BY %(cdc)s",
            f"GRANT REPLICATION SLAVE, REPLICATION CLIENT, BINLOG MONITOR, RELOAD, SELECT ON *.* TO '{m.cdc_user}'@'127.0.0.1'",
            f"CREATE DATABASE IF NOT EXISTS `{m.database}`",
            f"CREATE USER IF NOT EXISTS '{m.app_user}'@'127.0.0.1' IDENTIFIED BY %(app)s",
            f"ALTER USER '{m.app_user}'@'127.0.0.1' IDENTIFIED BY %(app)s",
            f"GRANT SELECT, INSERT, UPDATE, DELETE ON `{m.database}`.* TO '{m.app_user}'@'127.0.0.1'",
        ]
        with conn, conn.cursor() as cur:
            for sql in statements:
                cur.execute(sql, {"root": root_pw, "cdc": cdc_pw, "app": app_pw})
            apply_schema(cur, m.database)
