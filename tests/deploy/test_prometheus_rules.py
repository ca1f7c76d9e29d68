"""The generated Prometheus config and rules pass promtool, and every alert fires on a synthetic series."""

from __future__ import annotations

import shutil
import subprocess

import pytest
import yaml

from deploy import prometheus_rules
from deploy.prometheus_config import RULES_FILE, render
from lakehouse.settings import Settings

PROMTOOL = shutil.which("promtool")
pytestmark = pytest.mark.skipif(PROMTOOL is None, reason="promtool comes with Debian's prometheus (make install)")

CLICKS = {"pipeline": "clicks", "topic": "clickevent"}


def promtool(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([PROMTOOL, *args], capture_output=True, text=True)


@pytest.fixture
def written(tmp_path):
    settings = Settings()
    (tmp_path / "prometheus.yml").write_text(render(settings))
    (tmp_path / RULES_FILE).write_text(prometheus_rules.render(settings))
    return settings, tmp_path


def test_config_and_rules_pass_promtool(written):
    _, path = written
    check = promtool("check", "config", str(path / "prometheus.yml"))
    assert check.returncode == 0, check.stdout + check.stderr
    rules = promtool("check", "rules", str(path / RULES_FILE))
    assert rules.returncode == 0, rules.stdout + rules.stderr


def series(name: str, labels: dict[str, str], values: str) -> dict[str, str]:
    body = ",".join(f'{k}="{v}"' for k, v in labels.items())
    return {"series": f"{name}{{{body}}}", "values": values}


def expected(settings: Settings, alert: str, labels: dict[str, str]) -> dict:
    rule = next(r for r in prometheus_rules.alert_rules(settings) if r["alert"] == alert)
    summary = rule["annotations"]["summary"]
    for key, value in labels.items():
        summary = summary.replace(f"{{{{ $labels.{key} }}}}", value)
    return {"exp_labels": {**labels, **rule["labels"]}, "exp_annotations": {"summary": summary}}


def test_every_alert_fires_on_a_synthetic_series_and_not_before(written):
    settings, path = written
    table = {"table": settings.catalog.clicks_table}
    cases = {
        "LakehouseTableStale": ([series("lakehouse_table_commit_age_seconds", table, "10x60 600x120")], table),
        "LakehouseKafkaLagGrowing": ([series("lakehouse_kafka_lag_records", {**CLICKS, "partition": "0"},
                                             "0x60 0+100x120")], CLICKS),
        "LakehouseDeadLetterRateHigh": ([
            series("lakehouse_pipeline_rows_total", {"pipeline": "clicks", "stage": "in"}, "0+1000x180"),
            series("lakehouse_pipeline_rows_total", {"pipeline": "clicks", "stage": "dead_letter"}, "0x60 0+500x120"),
        ], {}),
        "LakehouseCdcLagHigh": ([series("lakehouse_cdc_source_lag_seconds", {}, "1x60 900x120")], {}),
        "LakehouseNoCommits": ([
            series("lakehouse_kafka_lag_records", {**CLICKS, "partition": "0"}, "50x180"),
            series("lakehouse_pipeline_batches_total", {"pipeline": "clicks", "outcome": "committed"},
                   "0+1x60 60x120"),
        ], {}),
        "LakehouseSchemaEvolved": ([series("lakehouse_schema_changes_total", {**table, "change": "added"},
                                           "0x60 0x60 1x60")], {**table, "change": "added"}),
        "LakehouseExporterDown": ([series("up", {"job": "pipeline", "instance": "127.0.0.1:19101"}, "1x60 0x120")],
                                  {"job": "pipeline", "instance": "127.0.0.1:19101"}),
    }
    assert set(cases) == {r["alert"] for r in prometheus_rules.alert_rules(settings)}, "a new alert needs a case"
    tests = []
    for alert, (inputs, labels) in cases.items():
        tests.append({"interval": "5s", "input_series": inputs, "alert_rule_test": [
            {"eval_time": "4m", "alertname": alert, "exp_alerts": []},  # healthy first 5 minutes
            {"eval_time": "14m", "alertname": alert, "exp_alerts": [expected(settings, alert, labels)]},
        ]})
    spec = path / "rules_test.yml"
    spec.write_text(yaml.safe_dump({"rule_files": [RULES_FILE], "evaluation_interval": "5s", "tests": tests},
                                   sort_keys=False))
    result = promtool("test", "rules", str(spec))
    assert result.returncode == 0, result.stdout + result.stderr
