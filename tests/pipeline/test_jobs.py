"""The job registry (pipeline/jobs.py): one declaration per job, read by the CLI, the runner and the Spark session."""

from __future__ import annotations

import pytest

from lakehouse.settings import Settings
from pipeline.jobs import JOBS, job_spec


def test_each_declared_job_builds_the_class_that_carries_its_name():
    for name, spec in JOBS.items():
        assert spec.factory_class().name == name


def test_triggers_ports_and_pools_come_from_the_settings():
    s = Settings()
    assert job_spec("dims").trigger(s) == s.pipeline.dims_trigger_seconds
    assert job_spec("maintain").port(s.metrics) == s.metrics.maintenance_port
    assert job_spec("maintain").pool_weight(s) == (1, 0) and job_spec("maintain").lowers_priority
    assert set(JOBS) == {"clicks", "dims", "aggregate", "maintain"}  # each a Spark application (or part of one)


def test_an_unknown_job_is_named_with_the_ones_there_are():
    with pytest.raises(ValueError, match="unknown job 'click'; available: clicks, dims, aggregate, maintain"):
        job_spec("click")
