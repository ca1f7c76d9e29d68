"""Metrics a real Prometheus scrapes, the freshness probe against real commits, and the report."""

from __future__ import annotations

import random
import time

import requests

from lab.report import collect, write_report
from pipeline import metrics
from queries.freshness_probe import COMMIT_AGE, probe_once
from tests.pipeline.aggregate_support import append_clicks, click_rows


def one_second_each(n: int) -> list[int]:
    """Histogram counts (one per bucket, then +Inf) of n latencies of one second."""
    counts = [0] * (len(metrics.LATENCY_BUCKETS) + 1)
    counts[metrics.LATENCY_BUCKETS.index(1.0)] = n
    return counts


def prometheus_has(settings, promql: str) -> bool:
    reply = requests.get(f"http://{settings.prometheus.address}/api/v1/query", params={"query": promql}, timeout=10)
    return bool(reply.json()["data"]["result"])


def test_freshness_probe_tracks_real_commits(spark, click_settings):
    table = click_settings.catalog.clicks_table
    append_clicks(spark, click_settings, click_rows(50, random.Random(1)))
    probe_once(click_settings)
    first = COMMIT_AGE.labels(table)._value.get()
    time.sleep(3)
    probe_once(click_settings)
    idle = COMMIT_AGE.labels(table)._value.get()
    assert idle >= first + 2.5, "commit age grows while nobody commits"
    append_clicks(spark, click_settings, click_rows(50, random.Random(2)))
    views = {v.table: v for v in probe_once(click_settings)}
    assert COMMIT_AGE.labels(table)._value.get() < idle, "a commit makes the table fresh again"
    assert views[table].records == 100 and views[table].data_files >= 2 and views[table].snapshots == 2
    assert views[table].max_event_time is not None


def test_exporters_reach_prometheus_and_the_report_plots_them(settings, tmp_path):
    # the aggregate port: no other test starts a process that serves it
    metrics.serve(settings.metrics.host, settings.metrics.aggregate_port)
    metrics.ROWS.labels("clicks", "valid").inc(1000)
    metrics.LAG.labels("clicks", settings.kafka.clicks_topic, "0").set(42)
    metrics.E2E_LATENCY.add(settings.catalog.clicks_table, one_second_each(10), 12.0)
    deadline = time.monotonic() + 60
    while not prometheus_has(settings, 'lakehouse_kafka_lag_records{pipeline="clicks"}'):
        assert time.monotonic() < deadline, "Prometheus never scraped the pipeline exporter"
        time.sleep(1)
    for _ in range(3):  # a rate needs several samples
        metrics.ROWS.labels("clicks", "valid").inc(500)
        metrics.E2E_LATENCY.add(settings.catalog.clicks_table, one_second_each(10), 12.0)
        time.sleep(settings.prometheus.scrape_interval_seconds + 1)
    assert prometheus_has(settings, "lakehouse_e2e_latency_seconds_bucket")

    panels = {p.title.split(" (")[0]: p for p in collect(settings, 300)}
    assert panels["Kafka lag"].series, "lag plotted"
    assert panels["End-to-end latency"].series, "latency quantiles plotted"
    page = write_report(settings, tmp_path, 300)
    pngs = sorted(tmp_path.glob("*.png"))
    assert len(pngs) == 4 and all(p.stat().st_size > 10_000 for p in pngs)
    assert "Kafka lag" in page.read_text()
