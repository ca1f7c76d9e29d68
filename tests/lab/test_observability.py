"""Metrics a real Prometheus scrapes, the freshness probe against real commits, and the report."""

from __future__ import annotations

import random
import time

import requests

from lab.bench import freshness
from lab.report import collect, plot_freshness, rate_window, write_report
from pipeline import metrics
from pipeline.metrics import TABLE_COMMIT_AGE as COMMIT_AGE
from queries.freshness_probe import probe_once
from tests.support.aggregates import append_clicks, click_rows


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


def test_the_freshness_plot_shows_what_readers_see_not_a_stale_writer(spark, click_settings):
    """A writer that stopped committing still exports its last commit time (the demo's bootstrap did): the
    plot must show the probe's age of the table, which drops when the table commits, not that stale one."""
    from prometheus_client import CollectorRegistry, Gauge, start_http_server

    s = click_settings
    table = s.catalog.clicks_table
    stale = CollectorRegistry()
    Gauge("lakehouse_table_last_commit_timestamp_seconds", "a writer that stopped", ["table"],
          registry=stale).labels(table).set(time.time() - 600)
    start_http_server(s.metrics.maintenance_port, s.metrics.host, registry=stale)  # another scraped process
    metrics.serve(s.metrics.host, s.metrics.probe_port)
    append_clicks(spark, s, click_rows(20, random.Random(3)))
    deadline = time.monotonic() + 60
    while not (prometheus_has(s, f'lakehouse_table_commit_age_seconds{{table="{table}"}}')
               and prometheus_has(s, f'lakehouse_table_last_commit_timestamp_seconds{{table="{table}"}}')):
        probe_once(s)
        assert time.monotonic() < deadline, "Prometheus never scraped both exporters"
        time.sleep(1)
    for _ in range(3):
        probe_once(s)
        time.sleep(s.prometheus.scrape_interval_seconds)
    series = {p.title.split(" (")[0]: p for p in collect(s, 120)}["Freshness per table"].series[table]
    assert max(v for _, v in series[-3:]) < 300, f"the stale writer's age was plotted: {series[-3:]}"
    before = series[-1][1]
    append_clicks(spark, s, click_rows(20, random.Random(4)))
    probe_once(s)
    time.sleep(s.prometheus.scrape_interval_seconds + 1)
    assert collect(s, 120)[1].series[table][-1][1] < before + 1, "a commit makes the plotted age drop"


def test_rate_windows_fit_the_run():
    assert rate_window(60, 2) == 10  # the demo's minute: 10 s, not a 1-minute ramp
    assert rate_window(3600, 2) == 60 and rate_window(10, 5) == 20


def test_the_measured_freshness_curve_holds_the_summary_figures(tmp_path):
    delays_ms = [100 * i for i in range(1, 1001)]  # 0.1 s .. 100 s
    measured = freshness._from_delays("dimensions", "products, members", delays_ms)
    assert len(measured.percentiles_s) == 99
    assert (measured.p50_s, measured.p95_s, measured.p99_s) == (
        measured.percentiles_s[49], measured.percentiles_s[94], measured.percentiles_s[98])
    assert measured.p95_s == freshness.quantiles(delays_ms, (95,))[0] / 1000
    empty = freshness._from_delays("clicks", "clicks", [])
    plot_freshness([measured, empty], tmp_path / "f.png")
    assert (tmp_path / "f.png").stat().st_size > 10_000
