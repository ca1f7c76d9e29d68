"""Free the metastore table locks that dead writers leave behind.

Iceberg's HiveCatalog holds an exclusive metastore lock around every commit. A writer
killed with ``kill -9`` mid-commit never releases it, and Hive Metastore 2.3 only
times locks out from its ACID housekeeper, which needs the full transaction schema and
the compactor. Without help, every later commit on that table waits for the lock and
fails after Iceberg's 3-minute timeout — forever.

Live Iceberg locks heartbeat every third of ``metastore.stale_lock_seconds`` (see
``pipeline.spark_session``), so a lock silent for longer belongs to a dead writer. The
reaper, a daemon thread in every writing process, releases such locks on its own tables.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable

from hive_metastore.ThriftHiveMetastore import Client
from hive_metastore.ttypes import ShowLocksRequest, UnlockRequest
from thrift.protocol import TBinaryProtocol
from thrift.transport import TSocket, TTransport

from lakehouse.settings import Settings
from pipeline import metrics

log = logging.getLogger(__name__)


class _Metastore:
    """A short-lived thrift connection to the metastore."""

    def __init__(self, settings: Settings):
        socket = TSocket.TSocket(settings.metastore.host, settings.metastore.port)
        socket.setTimeout(10_000)
        self.transport = TTransport.TBufferedTransport(socket)
        self.client = Client(TBinaryProtocol.TBinaryProtocol(self.transport))

    def __enter__(self) -> Client:
        self.transport.open()
        return self.client

    def __exit__(self, *exc) -> None:
        self.transport.close()


def release_stale_locks(settings: Settings, tables: Iterable[str], now_ms: int | None = None) -> list[int]:
    """Release locks on ``tables`` (``db.table``) silent for longer than the stale limit; return their ids."""
    now_ms = now_ms if now_ms is not None else int(time.time() * 1000)
    limit_ms = settings.metastore.stale_lock_seconds * 1000
    released = []
    with _Metastore(settings) as client:
        for table in tables:
            database, name = table.lower().split(".", 1)
            for lock in client.show_locks(ShowLocksRequest(dbname=database, tablename=name)).locks or []:
                if now_ms - lock.lastheartbeat <= limit_ms:
                    continue
                client.unlock(UnlockRequest(lockid=lock.lockid))
                released.append(lock.lockid)
                metrics.STALE_LOCKS_RELEASED.labels(table).inc()
                log.warning("released metastore lock %d on %s: no heartbeat for %.0fs (its writer died)",
                            lock.lockid, table, (now_ms - lock.lastheartbeat) / 1000)
    return released


class StaleLockReaper:
    """Context manager running :func:`release_stale_locks` every few seconds in a daemon thread."""

    def __init__(self, settings: Settings, tables: Iterable[str]):
        self.settings = settings
        self.tables = list(tables)
        self.every = settings.metastore.stale_lock_seconds / 3
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="stale-lock-reaper", daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            try:
                release_stale_locks(self.settings, self.tables)
            except Exception as exc:  # noqa: BLE001 - a metastore hiccup must not stop the reaper
                log.debug("stale lock check failed: %s", exc)

    def __enter__(self) -> "StaleLockReaper":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(5)
