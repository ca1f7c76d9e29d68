"""Dashboards as code: valid JSON, PromQL that promtool parses, only metrics the code exports."""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import pytest
import yaml
from prometheus_client import REGISTRY

import pipeline.capture.connector  # noqa: F401 - registers the CDC metrics
import pipeline.metrics  # noqa: F401 - registers the pipeline metrics
import queries.freshness_probe  # noqa: F401 - registers the probe metrics
from deploy import prometheus_rules
from deploy.grafana import dashboards

SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count"), "gauge": ("",), "unknown": ("",)}
LOADGEN = {"lakehouse_loadgen_events_total"}  # served by the Locust process (loadgen/session.py)


def exported_series() -> set[str]:
    names = set(LOADGEN)
    for family in REGISTRY.collect():
        names.update(family.name + s for s in SUFFIXES.get(family.type, ("",)))
    names.update(f"lakehouse_e2e_latency_seconds{s}" for s in SUFFIXES["histogram"])
    names.update(r["record"] for r in prometheus_rules.recording_rules())
    return names


def referenced(expr: str) -> set[str]:
    without_strings = re.sub(r'"[^"]*"', '""', expr)
    return set(re.findall(r"\blakehouse[_:][A-Za-z0-9_:]*", without_strings))


def test_dashboards_build_with_panels_and_titles(tmp_path):
    paths = dashboards.write_all(tmp_path)
    assert len(paths) == 4
    for path in paths:
        board = json.loads(path.read_text())
        assert board["title"] and board["uid"] and board["panels"]
        for panel in board["panels"]:
            assert panel["title"] and panel["fieldConfig"]["defaults"]["unit"] and panel["targets"]


def test_every_expression_uses_only_exported_metrics():
    known = exported_series()
    for expr in dashboards.expressions():
        unknown = referenced(expr) - known
        assert not unknown, f"{expr!r} reads {sorted(unknown)}, which nothing exports"


def test_a_misspelt_metric_is_caught():
    assert referenced('rate(lakehouse_pipeline_rowz_total{stage="in"}[1m])') - exported_series() == \
        {"lakehouse_pipeline_rowz_total"}


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool comes with Debian's prometheus")
def test_every_expression_parses(tmp_path):
    rules = {"groups": [{"name": "dashboards", "rules": [
        {"record": f"dashboard:expr_{i}", "expr": expr} for i, expr in enumerate(dashboards.expressions())]}]}
    path = tmp_path / "exprs.yml"
    path.write_text(yaml.safe_dump(rules))
    result = subprocess.run(["promtool", "check", "rules", str(path)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_provisioning_points_panels_at_the_datasource_they_use():
    files = dashboards.provisioning("http://prometheus:9090", "/var/lib/grafana/dashboards")
    source = files["datasources/lakehouse.yaml"]["datasources"][0]
    assert source["uid"] == dashboards.DATASOURCE_UID and source["url"] == "http://prometheus:9090"
    used = {p["datasource"]["uid"] for uid in dashboards.DASHBOARDS for p in dashboards.build(uid)["panels"]}
    assert used == {source["uid"]}
