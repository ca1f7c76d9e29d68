"""The lakehouse's Grafana dashboards, built with grafana-foundation-sdk.

Four dashboards, one per question an operator asks: is data flowing and fresh
(overview)? what are the jobs doing (pipeline)? is CDC keeping up (cdc)? are the tables
healthy (tables)? Every panel is a title, a unit and PromQL over metrics the code
exports (tests check both). ``python -m deploy.grafana.dashboards --out DIR`` writes
the JSON files Grafana provisions.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path

from grafana_foundation_sdk.builders import dashboard, prometheus, timeseries
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models.dashboard import DataSourceRef

DATASOURCE_UID = "lakehouse-prometheus"


@dataclass(frozen=True)
class PanelSpec:
    title: str
    unit: str  # Grafana unit id: s, short, ops, bytes, percentunit
    queries: tuple[tuple[str, str], ...]  # (PromQL, legend)


def q(expr: str, legend: str) -> tuple[str, str]:
    return expr, legend


DASHBOARDS: dict[str, tuple[str, list[PanelSpec]]] = {
    "lakehouse-overview": ("Lakehouse overview", [
        PanelSpec("Events/s: produced vs committed", "ops", (
            q("lakehouse:produced_events:rate1m", "produced"),
            q('sum(rate(lakehouse_pipeline_rows_total{pipeline="clicks",stage=~"valid|dead_letter"}[1m]))',
              "committed"))),
        PanelSpec("End-to-end latency (produce -> visible)", "s", (
            q("lakehouse:e2e_latency_seconds:p50", "p50 {{table}}"),
            q("lakehouse:e2e_latency_seconds:p95", "p95 {{table}}"),
            q("lakehouse:e2e_latency_seconds:p99", "p99 {{table}}"))),
        PanelSpec("Freshness per table (reader's view)", "s", (
            q("lakehouse_table_commit_age_seconds", "{{table}}"),)),
        PanelSpec("Kafka lag", "short", (q("lakehouse:kafka_lag_records:sum", "{{pipeline}} {{topic}}"),)),
        PanelSpec("Dead-letter share", "percentunit", (q("lakehouse:dead_letter_share:rate5m", "clicks"),)),
    ]),
    "lakehouse-pipeline": ("Lakehouse pipeline internals", [
        PanelSpec("Batch duration p95", "s", (
            q("histogram_quantile(0.95, sum by (le, pipeline) (rate(lakehouse_pipeline_batch_duration_seconds_bucket[5m])))",
              "{{pipeline}}"),)),
        PanelSpec("Click batch phases (mean)", "s", (
            q("sum by (phase) (rate(lakehouse_pipeline_batch_phase_seconds_sum[5m])) / "
              "sum by (phase) (rate(lakehouse_pipeline_batch_phase_seconds_count[5m]))", "{{phase}}"),)),
        PanelSpec("Click batch: standing tasks' seconds by phase (per batch, summed over tasks)", "s", (
            q('sum by (phase) (rate(lakehouse_pipeline_task_phase_seconds_total{pipeline="clicks"}'
              '[5m])) / scalar(sum(rate(lakehouse_pipeline_batch_duration_seconds_count{pipeline="clicks"}[5m])))',
              "{{phase}}"),)),
        PanelSpec("Commit duration p95", "s", (
            q("histogram_quantile(0.95, sum by (le, table) (rate(lakehouse_pipeline_commit_duration_seconds_bucket[5m])))",
              "{{table}}"),)),
        PanelSpec("Rows per batch (mean)", "short", (
            q("sum by (pipeline) (rate(lakehouse_pipeline_batch_rows_sum[5m])) / "
              "sum by (pipeline) (rate(lakehouse_pipeline_batch_rows_count[5m]))", "{{pipeline}}"),)),
        PanelSpec("Batches by outcome", "ops", (
            q("sum by (pipeline, outcome) (rate(lakehouse_pipeline_batches_total[1m]))", "{{pipeline}} {{outcome}}"),)),
        PanelSpec("Live aggregates delay", "s", (q("lakehouse_aggregate_delay_seconds", "aggregates"),)),
        PanelSpec("Live aggregates: click rows in, rows held", "short", (
            q('sum(rate(lakehouse_pipeline_rows_total{pipeline="aggregate",stage="in"}[1m]))', "click rows in/s"),
            q("lakehouse_aggregate_state_rows", "held: {{table}}"))),
        PanelSpec("Stale metastore locks freed", "short", (
            q("sum by (table) (increase(lakehouse_metastore_stale_locks_released_total[15m]))", "{{table}}"),)),
    ]),
    "lakehouse-cdc": ("Lakehouse CDC", [
        PanelSpec("Capture lag behind the binlog", "s", (q("lakehouse_cdc_source_lag_seconds", "capture"),)),
        PanelSpec("Dimension apply lag", "s", (q("lakehouse_cdc_apply_lag_seconds", "{{table}}"),)),
        PanelSpec("Change events/s by op", "ops", (
            q("sum by (table, op) (rate(lakehouse_cdc_events_total[1m]))", "{{table}} {{op}}"),)),
        PanelSpec("Rows applied/s", "ops", (
            q("sum by (table, action) (rate(lakehouse_cdc_rows_applied_total[1m]))", "{{table}} {{action}}"),)),
        PanelSpec("Apply batch: Spark job and commits (p95)", "s", (
            q('histogram_quantile(0.95, sum by (le) (rate(lakehouse_cdc_stage_seconds_bucket{stage="apply"}[5m])))',
              "Spark job (read, shuffle, apply)"),
            q('histogram_quantile(0.95, sum by (le, table) (rate(lakehouse_pipeline_commit_duration_seconds_bucket'
              '{table=~"dim.*"}[5m])))', "commit {{table}}"),
            q('histogram_quantile(0.95, sum by (le) (rate(lakehouse_pipeline_batch_duration_seconds_bucket'
              '{pipeline="dims"}[5m])))', "whole batch"))),
        PanelSpec("Apply key state by executor (key index bytes)", "bytes", (
            q("lakehouse_cdc_state_executor_bytes", "executor {{executor}}"),)),
        PanelSpec("Apply key state: live keys per bucket", "short", (
            q("lakehouse_cdc_state_keys", "{{table}} bucket {{bucket}}"),)),
        PanelSpec("Apply input rows/s", "ops", (
            q('sum(rate(lakehouse_pipeline_rows_total{pipeline="dims",stage="in"}[1m]))', "changes in"),)),
    ]),
    "lakehouse-tables": ("Lakehouse table health", [
        PanelSpec("Live data files", "short", (q("lakehouse_table_data_files", "{{table}}"),)),
        PanelSpec("Delete files", "short", (q("lakehouse_table_delete_files", "{{table}}"),)),
        PanelSpec("Snapshots", "short", (q("lakehouse_table_snapshots", "{{table}}"),)),
        PanelSpec("Records", "short", (q("lakehouse_table_records", "{{table}}"),)),
        PanelSpec("Maintenance actions", "ops", (
            q("sum by (action, outcome) (rate(lakehouse_maintenance_runs_total[5m]))",
              "{{action}} {{outcome}}"),)),
        PanelSpec("Files rewritten and snapshots expired", "short", (
            q("sum by (action) (increase(lakehouse_maintenance_files_rewritten_total[5m]))", "files: {{action}}"),
            q("sum(increase(lakehouse_maintenance_snapshots_expired_total[5m]))", "snapshots expired"),
            q("sum(increase(lakehouse_maintenance_orphan_files_removed_total[5m]))", "orphans removed"))),
    ]),
}


def build(uid: str) -> dict:
    title, specs = DASHBOARDS[uid]
    source = DataSourceRef(type_val="prometheus", uid=DATASOURCE_UID)
    board = (dashboard.Dashboard(title).uid(uid).tags(["lakehouse"]).refresh("10s")
             .time("now-30m", "now").timezone("utc").editable())
    for spec in specs:
        panel = timeseries.Panel().title(spec.title).unit(spec.unit).datasource(source).height(8).span(12).min(0)
        for ref, (expr, legend) in zip("ABCDEFGH", spec.queries):
            panel = panel.with_target(prometheus.Dataquery().expr(expr).legend_format(legend).ref_id(ref))
        board = board.with_panel(panel)
    return json.loads(JSONEncoder(sort_keys=True).encode(board.build()))


def expressions() -> list[str]:
    """Every PromQL expression on every dashboard."""
    return [expr for _, specs in DASHBOARDS.values() for spec in specs for expr, _ in spec.queries]


def provisioning(prometheus_url: str, dashboards_dir: str) -> dict[str, dict]:
    """Grafana provisioning files: the Prometheus datasource (fixed uid, as the panels expect) and a
    file provider loading the dashboard JSON from ``dashboards_dir``."""
    return {
        "datasources/lakehouse.yaml": {"apiVersion": 1, "datasources": [{
            "name": "Prometheus", "type": "prometheus", "uid": DATASOURCE_UID, "access": "proxy",
            "url": prometheus_url, "isDefault": True, "editable": False}]},
        "dashboards/lakehouse.yaml": {"apiVersion": 1, "providers": [{
            "name": "lakehouse", "folder": "Lakehouse", "type": "file", "disableDeletion": True,
            "options": {"path": dashboards_dir}}]},
    }


def write_all(out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for uid in DASHBOARDS:
        path = out / f"{uid}.json"
        path.write_text(json.dumps(build(uid), indent=2, sort_keys=True))
        paths.append(path)
    return paths


def main() -> None:
    parser = argparse.ArgumentParser(description="Write the lakehouse Grafana dashboards as JSON.")
    parser.add_argument("--out", type=Path, required=True, help="folder for the dashboard JSON files")
    for path in write_all(parser.parse_args().out):
        print(path)


if __name__ == "__main__":
    main()
