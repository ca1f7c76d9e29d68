"""The soak's maintenance service runs at the configured CPU priority, JVM included, and is measurable."""

from __future__ import annotations

import time

import psutil
import pytest

from lab.soak.services import maintenance_service

pytestmark = [pytest.mark.stack]

def test_maintenance_service_and_its_spark_jvm_run_at_the_configured_niceness(settings, tmp_path):
    s = settings.model_copy(deep=True)
    tables = [name for name in type(s.catalog).model_fields if name.endswith("_table")]
    for name in tables:  # tables that do not exist: the service idles instead of maintaining the suite's
        setattr(s.catalog, name, f"nice_probe.{name}_{time.time_ns()}")
    s.maintenance.nice, s.maintenance.interval_seconds = 17, 5
    with maintenance_service(s, tmp_path / "maintenance.log") as probe:
        root = psutil.Process(probe.process.pid)
        deadline = time.monotonic() + 120
        while not any(p.name() == "java" for p in root.children(recursive=True)) and time.monotonic() < deadline:
            assert probe.process.poll() is None, (tmp_path / "maintenance.log").read_text()[-2000:]
            time.sleep(0.5)
        family = [root, *root.children(recursive=True)]
        assert any(p.name() == "java" for p in family), "the service never started its Spark JVM"
        assert {p.nice() for p in family} == {17}  # the JVM inherits the priority the service gave itself
        # a JVM's start alone costs seconds of CPU: the tree is being read (polled: the JVM may have only
        # just appeared, 0.57 s into its start in one CI run)
        deadline = time.monotonic() + 60
        while probe.cpu_so_far() <= 1.0 and time.monotonic() < deadline:
            time.sleep(0.5)
        assert probe.cpu_so_far() > 1.0
        assert isinstance(probe.seconds_so_far(), dict)  # alive: no error raised
    assert probe.process.poll() is not None  # stopped with the context
