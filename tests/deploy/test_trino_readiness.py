"""Trino is called ready only when a session can read an ``iceberg`` table: checked over cold starts.

After a cold start the coordinator answers ``SELECT 1`` and ``USE`` a few seconds before it knows
which node serves the ``iceberg`` catalog; a table scan in that gap fails with "No nodes available
to run query". The demo's ending (seed 001's session in the real CLI) ran into it on quiet machines.
Here each start is followed at once by a scan
and by that session; one start happens while both cores are busy,
since a busy machine shifts the gap.
"""

from __future__ import annotations

import multiprocessing
import subprocess
import time

import pyarrow as pa
import pytest

from deploy.local.services.trino import cli_command
from lakehouse.catalog import pyiceberg_catalog

pytestmark = pytest.mark.slow


def _spin(seconds: float) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass


def _scan(settings, namespace: str, table: str) -> list:
    """The table read through the Python client: no JVM to start first, so it follows readiness closest."""
    import trino

    t = settings.trino
    with trino.dbapi.connect(host=t.host, port=t.port, user=t.user, http_scheme="http",
                             catalog=settings.catalog.trino_catalog, schema=namespace) as conn:
        cursor = conn.cursor()
        cursor.execute(f"SELECT event_id FROM {table}")
        return sorted(row[0] for row in cursor.fetchall())


def _seed_session(settings, namespace: str, table: str) -> subprocess.CompletedProcess:
    session = f"use {namespace};\nselect * from {table} limit 100;\n"
    return subprocess.run(cli_command(settings, ["--output-format=CSV_HEADER"], interactive=False),
                          input=session, capture_output=True, text=True, timeout=120, check=False)


@pytest.mark.parametrize("busy", [False, False, True], ids=["quiet-1", "quiet-2", "busy"])
def test_the_seed_session_succeeds_right_after_a_cold_start(stack, settings, busy):
    namespace, table = settings.catalog.clicks_table.split(".")[0], "trino_cold_start"
    catalog = pyiceberg_catalog(settings)
    catalog.create_namespace_if_not_exists(namespace)
    rows = pa.table({"event_id": ["a", "b"]})
    created = catalog.create_table_if_not_exists(f"{namespace}.{table}", schema=rows.schema)
    if created.current_snapshot() is None:
        created.append(rows)

    stack.stop_service("trino")
    burners = [multiprocessing.Process(target=_spin, args=(90.0,), daemon=True) for _ in range(2 if busy else 0)]
    for burner in burners:
        burner.start()
    try:
        stack.ensure("trino")
        scanned = _scan(settings, namespace, table)  # at once: no pause between "ready" and the reads
        done = _seed_session(settings, namespace, table)
    finally:
        for burner in burners:
            burner.terminate()
            burner.join(5)
    assert scanned == ["a", "b"]
    assert done.returncode == 0, done.stderr[-1500:]
    lines = done.stdout.strip().splitlines()
    assert lines[0] == '"event_id"' and sorted(lines[1:]) == ['"a"', '"b"'], done.stdout
