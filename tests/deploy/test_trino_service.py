"""The local Trino's failure modes, each one clear message before anything starts (no stack needed)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from deploy.k8s.generate import OUT
from deploy.k8s.profile import cluster_settings
from deploy.local.binaries import java_home_at_least
from deploy.local.processes import StackError
from deploy.local.stack import LocalStack
from deploy.trino_config import catalog_file_name, iceberg_catalog, local_server
from lakehouse.settings import Settings
from lakehouse.settings_env import declared_settings

JDK17 = Path("/usr/lib/jvm/java-17-openjdk-amd64")


@pytest.mark.skipif(not (JDK17 / "release").exists(), reason="needs Debian's OpenJDK 17 as the too-old JDK")
def test_a_jdk_too_old_for_trino_is_named_with_the_fix():
    with pytest.raises(StackError) as err:
        java_home_at_least(24, JDK17, "Trino 476")
    message = str(err.value)
    assert "Trino 476 needs Java 24 or newer" in message and "release 17" in message
    assert "LAKEHOUSE_TRINO__JAVA_HOME" in message


def test_a_jdk_24_or_newer_is_found_on_this_machine():
    """Trino 476 refuses older JVMs; the machines carry a Temurin 25 beside the default OpenJDK 17."""
    home = java_home_at_least(24, None, "Trino 476")
    assert (home / "bin" / "java").exists()


def test_trino_on_a_taken_port_is_refused_naming_the_port(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        settings = Settings(run_dir=tmp_path / "run")
        settings.trino.port = port
        with pytest.raises(StackError) as err:
            LocalStack(settings).ensure("trino")
    assert f"port {port} (trino) is in use" in str(err.value)
    assert not (tmp_path / "run" / "pids" / "trino.json").exists(), "nothing was started, nothing is recorded"


def test_one_catalog_file_for_both_runtimes():
    """The cluster's mounted catalog is the function the local server's is written by, with the cluster's settings."""
    generated = (OUT / catalog_file_name(cluster_settings())).read_text()
    assert generated.split("\n", 1)[1] == iceberg_catalog(cluster_settings())
    local = iceberg_catalog(declared_settings())
    assert "hive.metastore.uri=thrift://127.0.0.1:19083" in local and "s3.endpoint=http://127.0.0.1:18333" in local
    assert "${ENV:LAKEHOUSE_S3__SECRET_KEY}" in local, "credentials come from the environment, never the file"


def test_the_local_server_binds_loopback_only():
    files = local_server(declared_settings(), "/tmp/trino-data")
    assert "node.bind-ip=127.0.0.1" in files["node.properties"]
    assert "http-server.http.port=18080" in files["config.properties"]
