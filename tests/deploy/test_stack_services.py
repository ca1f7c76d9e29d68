"""The stack comes up from nothing and every service answers its own protocol."""

from __future__ import annotations

import json
import subprocess
import sys

import psutil

from deploy.local import processes

SERVICES = {"s3", "kafka", "postgres", "metastore", "mariadb", "prometheus", "query", "trino"}


def test_every_service_is_ready_with_a_live_pid(stack, trino):
    rows = stack.status()
    assert {r.service for r in rows} == SERVICES
    for row in rows:
        assert row.ready, f"{row.service} not ready"
        assert psutil.pid_exists(row.pid)
        assert row.memory_mb and row.memory_mb > 1


def test_every_listening_socket_is_loopback_only(stack, trino):
    for service in stack.services():
        record = processes.read_record(stack.settings.run_dir, service.name)
        proc = psutil.Process(record.pid)
        family = [proc] + proc.children(recursive=True)
        listening = [c for p in family for c in p.net_connections(kind="inet") if c.status == psutil.CONN_LISTEN]
        assert listening, f"{service.name} listens on nothing"
        for conn in listening:
            assert conn.laddr.ip in ("127.0.0.1", "::1"), f"{service.name} listens on {conn.laddr}"


def test_status_json_is_stable_and_true(stack, trino):
    out = subprocess.run([sys.executable, "-m", "cli.main", "stack", "status", "--json"],
                         capture_output=True, text=True, check=True)
    data = json.loads(out.stdout)
    assert data["all_ready"] is True
    assert {s["service"] for s in data["services"]} == SERVICES
    for entry in data["services"]:
        assert set(entry) == {"service", "pid", "port", "ready", "memory_mb", "log", "on_demand"}
    ports = {s["service"]: s["port"] for s in data["services"]}
    assert ports["kafka"] == stack.settings.kafka.port
    assert ports["metastore"] == stack.settings.metastore.port


def test_credentials_are_generated_private_and_masked(stack):
    path = stack.settings.credentials_path
    assert path.stat().st_mode & 0o777 == 0o600
    creds = json.loads(path.read_text())
    assert len(creds["s3.secret_key"]) >= 24
    out = subprocess.run([sys.executable, "-m", "cli.main", "config", "show", "--json"],
                         capture_output=True, text=True, check=True)
    for value in creds.values():
        assert value not in out.stdout
    shown = json.loads(out.stdout)
    assert shown["s3"]["secret_key"] == "**********"
    assert shown["kafka"]["port"] == stack.settings.kafka.port


def test_no_credential_appears_in_any_service_log(stack, settings, spark):
    """After Spark, the catalog and S3 have talked with each other, no service log holds a credential."""
    creds = json.loads(stack.settings.credentials_path.read_text())
    logs = sorted((settings.run_dir / "logs").glob("*.log"))
    assert len(logs) >= len(stack.services())
    for path in logs:
        text = path.read_text(errors="replace")
        leaked = [name for name, value in creds.items() if value in text]
        assert not leaked, f"{path.name} contains {leaked}"


def test_s3_rejects_a_wrong_secret(settings):
    import boto3
    import pytest
    from botocore.exceptions import ClientError

    bad = boto3.client("s3", endpoint_url=settings.s3.endpoint, aws_access_key_id=settings.s3.access_key.get_secret_value(),
                       aws_secret_access_key="not-the-secret", region_name=settings.s3.region)
    with pytest.raises(ClientError) as err:
        bad.list_objects_v2(Bucket=settings.s3.warehouse_bucket)
    assert err.value.response["Error"]["Code"] in ("SignatureDoesNotMatch", "AccessDenied", "InvalidAccessKeyId")


def test_the_metastore_creates_folders_by_its_umask_not_by_the_s3_mappings_read_only_root():
    """Found by running the cluster: a metastore that is not root (the pod's uid 10001) made the first folder
    below the mapped ``s3://`` root with the root's 555 and then could create no database or table below it."""
    from deploy.metastore import site_properties
    from lakehouse.settings import load_settings

    properties = site_properties(load_settings(), "x", "file:///tmp/warehouse")
    assert properties["fs.s3.impl"].endswith("ViewFileSystemOverloadScheme")
    assert properties["hive.warehouse.subdir.inherit.perms"] == "false"


def test_the_metastore_makes_the_lock_tables_iceberg_commits_need_in_an_empty_database(stack, settings):
    """Found by running the cluster: its metastore had no lock tables, so every Iceberg commit failed
    ("Internal error processing lock"). The cluster's metastore now makes them before it starts, as the
    local stack does, with the one function both call."""
    from deploy.local.services.postgres import connect
    from deploy.metastore import ensure_lock_tables

    probe = "lock_tables_probe"
    with connect(settings) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{probe}"')
        conn.execute(f'CREATE DATABASE "{probe}"')
    try:
        fresh = settings.model_copy(update={"postgres": settings.postgres.model_copy(update={"metastore_db": probe})})
        ensure_lock_tables(fresh)
        ensure_lock_tables(fresh)  # idempotent: every start of the metastore runs it
        with connect(settings, dbname=probe) as conn:
            tables = {row[0] for row in conn.execute("SELECT table_name FROM information_schema.tables")}
        assert {"next_lock_id", "hive_locks", "txns"} <= tables, sorted(tables)
    finally:
        with connect(settings) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{probe}"')
