"""Connections to the source database (MariaDB, spoken to over MySQL's protocol), opened in one place.

The binlog capture, the load generator, the click job's key lookups, the local stack's bootstrap,
the benchmarks and the tests all connect here, so they agree on autocommit, timeouts and where each
user's password comes from (the settings, through ``secret``: a missing one says how to set it).
"""

from __future__ import annotations

import pymysql

from lakehouse.errors import LakehouseError
from lakehouse.settings import Settings, secret


def open_connection(*, user: str, password: str, host: str | None = None, port: int = 0,
                    unix_socket: str | None = None, database: str | None = None, timeout: int = 5,
                    **extra) -> pymysql.connections.Connection:
    """A connection in autocommit mode, over TCP or ``unix_socket``; ``extra`` goes to PyMySQL as it is
    (``read_timeout``, ``local_infile``, ``conv``)."""
    return pymysql.connect(host=host, port=port, unix_socket=unix_socket, user=user, password=password,
                           database=database, connect_timeout=timeout, autocommit=True, **extra)


def connect(settings: Settings, user: str | None = None, database: str | None = None, timeout: int = 5,
            password: str | None = None, **extra) -> pymysql.connections.Connection:
    """A connection to the settings' database server as ``user``: root unless named, or the capture's or the
    application's user (``mariadb.cdc_user``, ``mariadb.app_user``).

    The product's code passes ``password`` itself, resolved where it connects (``secret(value, "mariadb.…")``),
    so each workload's code names the one credential it needs and its pod is given that one alone
    (tests/deploy/k8s/test_secret_keys.py reads them off the code); without it, the user's password comes
    from the settings (the local stack and the harness, which hold them all).
    """
    m = settings.mariadb
    user = user or "root"
    if password is None:
        passwords = {
            "root": (m.root_password, "mariadb.root_password"),
            m.cdc_user: (m.cdc_password, "mariadb.cdc_password"),
            m.app_user: (m.app_password, "mariadb.app_password"),
        }
        if user not in passwords:
            raise LakehouseError(f"no password is configured for database user {user!r}: connect as root, "
                                 f"{m.cdc_user} (mariadb.cdc_user) or {m.app_user} (mariadb.app_user)")
        password = secret(*passwords[user])
    return open_connection(host=m.host, port=m.port, user=user, password=password, database=database,
                           timeout=timeout, **extra)
