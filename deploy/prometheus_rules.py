"""Prometheus recording and alert rules, generated from settings for both runtimes.

Recording rules give dashboards and reports cheap series (latency quantiles, rates);
alerts say what an on-call data engineer must act on. Thresholds are settings
(``LAKEHOUSE_PROMETHEUS__*``). ``promtool check rules`` and ``promtool test rules``
run on this output in the tests.
"""

from __future__ import annotations

from typing import Any

import yaml

from lakehouse.settings import Settings

QUANTILES = {"p50": 0.5, "p95": 0.95, "p99": 0.99}


def recording_rules() -> list[dict[str, str]]:
    rules = [
        {"record": f"lakehouse:e2e_latency_seconds:{name}",
         "expr": f"histogram_quantile({q}, sum by (le, table) (rate(lakehouse_e2e_latency_seconds_bucket[1m])))"}
        for name, q in QUANTILES.items()
    ]
    rules += [
        {"record": "lakehouse:rows:rate1m", "expr": "sum by (pipeline, stage) (rate(lakehouse_pipeline_rows_total[1m]))"},
        {"record": "lakehouse:produced_events:rate1m",
         "expr": 'sum(rate(lakehouse_loadgen_events_total{outcome="delivered"}[1m]))'},
        {"record": "lakehouse:kafka_lag_records:sum", "expr": "sum by (pipeline, topic) (lakehouse_kafka_lag_records)"},
        {"record": "lakehouse:dead_letter_share:rate5m",
         "expr": 'sum(rate(lakehouse_pipeline_rows_total{pipeline="clicks",stage="dead_letter"}[5m])) / '
                 'sum(rate(lakehouse_pipeline_rows_total{pipeline="clicks",stage="in"}[5m]))'},
    ]
    return rules


def alert_rules(settings: Settings) -> list[dict[str, Any]]:
    p = settings.prometheus
    stalled_for = f"{int(settings.pipeline.trigger_seconds * p.no_commit_intervals)}s"

    def alert(name: str, expr: str, summary: str, for_: str = p.alert_for, severity: str = "warning"):
        return {"alert": name, "expr": expr, "for": for_, "labels": {"severity": severity},
                "annotations": {"summary": summary}}

    return [
        alert("LakehouseTableStale", f"lakehouse_table_commit_age_seconds > {p.freshness_alert_seconds:g}",
              f"{{{{ $labels.table }}}}: newest commit older than {p.freshness_alert_seconds:g}s, as readers see it"),
        alert("LakehouseKafkaLagGrowing",
              "sum by (pipeline, topic) (lakehouse_kafka_lag_records) > 0 and "
              "sum by (pipeline, topic) (deriv(lakehouse_kafka_lag_records[2m])) > 0",
              "{{ $labels.pipeline }} falls behind on {{ $labels.topic }}: lag keeps growing"),
        alert("LakehouseDeadLetterRateHigh", f"lakehouse:dead_letter_share:rate5m > {p.dead_letter_alert_share:g}",
              f"over {p.dead_letter_alert_share:.0%} of click events go to the dead-letter table"),
        alert("LakehouseCdcLagHigh",
              f"lakehouse_cdc_source_lag_seconds > {p.cdc_lag_alert_seconds:g} or "
              f"max by (table) (lakehouse_cdc_apply_lag_seconds) > {p.cdc_lag_alert_seconds:g}",
              f"CDC is more than {p.cdc_lag_alert_seconds:g}s behind the source database"),
        alert("LakehouseNoCommits",
              'sum(lakehouse_kafka_lag_records{pipeline="clicks"}) > 0 and '
              f'sum(increase(lakehouse_pipeline_batches_total{{pipeline="clicks",outcome="committed"}}[{stalled_for}]))'
              " == 0",
              f"click records are waiting but nothing was committed for {stalled_for}", for_="0s", severity="critical"),
        alert("LakehouseSchemaEvolved", "sum by (table, change) (increase(lakehouse_schema_changes_total[15m])) > 0",
              "{{ $labels.table }}: columns {{ $labels.change }} by schema evolution in the last 15 minutes "
              "(`lakehouse contract history` says which, when and at which offsets)", for_="0s", severity="info"),
        alert("LakehouseExporterDown", "up == 0", "{{ $labels.job }} at {{ $labels.instance }} is down",
              severity="critical"),
    ]


def rules(settings: Settings) -> dict[str, Any]:
    return {"groups": [
        {"name": "lakehouse-recording", "rules": recording_rules()},
        {"name": "lakehouse-alerts", "rules": alert_rules(settings)},
    ]}


def render(settings: Settings) -> str:
    return yaml.safe_dump(rules(settings), sort_keys=False)
