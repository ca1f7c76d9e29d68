"""`lakehouse report`: an HTML page with PNG plots from Prometheus, for people who would rather look.

Reads Prometheus's HTTP API (``query_range``) for the last N minutes: end-to-end latency
quantiles, freshness per table (the probe's reader view, else the writers' last commit),
produced vs committed events/s, and Kafka lag. Each plot has a title, units and a legend;
a summary table gives the last and worst values. Given the run's measured freshness (`make demo`
passes the figures its summary prints), the page opens with them: each table's delays from
the upstream event to the commit that made it visible, p1 to p99, with the p50/p95/p99 and the
goal the summary quotes marked on the curve, so the plot and the summary are one measurement.
"""

from __future__ import annotations

import datetime as dt
import html
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import requests

from lakehouse.errors import LakehouseError
from lakehouse.settings import Settings

if TYPE_CHECKING:
    from lab.bench.freshness import Freshness

#: freshness per table as readers see it (the probe), else the writers' own last commit: one series per table.
#: ``or on(table)``: the writers' view only for tables the probe has no series for. A plain ``or`` also kept
#: every writer series whose job/instance labels differ from the probe's, and the legend names both "{table}":
#: a process that stopped committing (the demo's bootstrap) drew its stale, climbing age over the probe's.
FRESHNESS = ("max by (table) (lakehouse_table_commit_age_seconds) or on(table) "
             "max by (table) (time() - lakehouse_table_last_commit_timestamp_seconds)")


def rate_window(since_seconds: float, scrape_seconds: float) -> int:
    """Seconds a rate() looks back: a sixth of the run, at least four scrapes, at most a minute.

    A one-minute rate window on the one-minute demo ramped up across the whole run.
    """
    return int(min(60.0, max(4 * scrape_seconds, since_seconds / 6)))


@dataclass
class Panel:
    title: str
    unit: str
    queries: dict[str, str]  # legend (may use {label}) -> PromQL
    legend_label: str | None = None
    window: tuple[float, float] = (0.0, 0.0)
    series: dict[str, list[tuple[float, float]]] = field(default_factory=dict)


def panels(window_s: int = 60) -> list[Panel]:
    """The report's plots; ``window_s``: how far back each rate() looks (``rate_window``)."""
    w = f"{window_s}s"
    latency = {f"p{int(q * 100)}": f"histogram_quantile({q}, sum by (le) (rate(lakehouse_e2e_latency_seconds_bucket[{w}])))"
               for q in (0.5, 0.95, 0.99)}
    return [
        Panel("End-to-end latency (produce -> committed and visible)", "seconds", latency),
        Panel("Freshness per table (now - newest commit, as readers see it)", "seconds",
              {"{table}": FRESHNESS}, legend_label="table"),
        Panel("Events per second: produced vs committed", "events/s", {
            "produced (Locust)": f'sum(rate(lakehouse_loadgen_events_total{{outcome="delivered"}}[{w}]))',
            "committed (valid + dead-lettered)":
                f'sum(rate(lakehouse_pipeline_rows_total{{pipeline="clicks",stage=~"valid|dead_letter"}}[{w}]))'}),
        Panel("Kafka lag (records not yet committed to Iceberg)", "records",
              {"{topic}": "sum by (topic) (lakehouse_kafka_lag_records)"}, legend_label="topic"),
    ]


class PrometheusError(LakehouseError):
    pass


def query_range(settings: Settings, promql: str, start: float, end: float, step: float) -> list[dict]:
    url = f"http://{settings.prometheus.address}/api/v1/query_range"
    try:
        reply = requests.get(url, params={"query": promql, "start": start, "end": end, "step": step}, timeout=30)
    except requests.ConnectionError:
        raise PrometheusError(f"Prometheus is not reachable at {settings.prometheus.address}: "
                              "start the stack (`lakehouse stack up`)") from None
    body = reply.json()
    if body.get("status") != "success":
        raise PrometheusError(f"Prometheus rejected {promql!r}: {body.get('error')}")
    return body["data"]["result"]


def collect(settings: Settings, since_seconds: float, now: float | None = None) -> list[Panel]:
    end = now or time.time()
    start = end - since_seconds
    step = max(settings.prometheus.scrape_interval_seconds, since_seconds / 300)
    result = panels(rate_window(since_seconds, settings.prometheus.scrape_interval_seconds))
    for panel in result:
        panel.window = (start, end)
        for legend, promql in panel.queries.items():
            for item in query_range(settings, promql, start, end, step):
                name = legend.format(**item["metric"]) if panel.legend_label else legend
                points = [(float(t), float(v)) for t, v in item["values"] if v not in ("NaN", "+Inf", "-Inf")]
                if points:
                    panel.series[name] = points
    return result


def _pyplot():
    """matplotlib's pyplot without a screen."""
    # deferred: matplotlib (~0.5 s) only when a report is drawn
    import matplotlib

    matplotlib.use("Agg")  # no screen: set before pyplot loads
    # deferred: pyplot after the backend is chosen
    import matplotlib.pyplot as plt

    return plt


def plot(panel: Panel, path: Path) -> None:
    # deferred: matplotlib (~0.5 s) only when a report is drawn
    import matplotlib.dates as mdates

    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(9, 3.6), dpi=110)
    for name, points in sorted(panel.series.items()):
        ax.plot([dt.datetime.fromtimestamp(t, dt.timezone.utc) for t, _ in points], [v for _, v in points],
                label=name, linewidth=1.6)
    ax.set_title(panel.title, fontsize=11, loc="left")
    ax.set_ylabel(panel.unit)
    ax.set_xlabel("time (UTC)")
    short = panel.window[1] - panel.window[0] <= 1800
    ax.xaxis.set_major_formatter(mdates.DateFormatter("%H:%M:%S" if short else "%H:%M"))
    ax.grid(alpha=0.3)
    ax.set_ylim(bottom=0)
    ax.set_xlim(*(dt.datetime.fromtimestamp(t, dt.timezone.utc) for t in panel.window))
    _finish(plt, fig, ax, path, "no data in this window" if not panel.series else None)


def _finish(plt, fig, ax, path: Path, empty: str | None) -> None:
    """A legend, or ``empty`` said in the middle of the plot; then the PNG written and the figure closed."""
    if empty is None:
        ax.legend(loc="upper left", fontsize=8, frameon=False)
    else:
        ax.text(0.5, 0.5, empty, ha="center", va="center", transform=ax.transAxes, color="grey")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


FRESHNESS_TITLE = "Freshness per table (upstream event -> visible to readers), as the summary measures it"


def plot_freshness(measured: list[Freshness], path: Path) -> None:
    """Each table's delay at every percentile, with its p50/p95/p99 marked and its goal as a dashed line."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(9, 3.6), dpi=110)
    drawn = [f for f in measured if f.percentiles_s]
    for f in drawn:
        line, = ax.plot(range(1, len(f.percentiles_s) + 1), f.percentiles_s, linewidth=1.6,
                        label=f"{f.name}: p95 {f.p95_s:.2f} s ({f.rows:,} rows)")
        ax.plot([50, 95, 99], [f.p50_s, f.p95_s, f.p99_s], "o", color=line.get_color(), markersize=4)
        ax.axhline(f.goal_s, color=line.get_color(), linestyle="--", linewidth=0.8, alpha=0.7)
    ax.set_title(FRESHNESS_TITLE, fontsize=11, loc="left")
    ax.set_xlabel("percentile of rows (dots: p50, p95, p99; dashed: each table's p95 goal)")
    ax.set_ylabel("seconds")
    ax.set_xlim(0, 100)
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    _finish(plt, fig, ax, path, "nothing measured" if not drawn else None)


def _freshness_section(measured: list[Freshness], out_dir: Path) -> str:
    png = out_dir / "0-freshness-measured.png"
    plot_freshness(measured, png)
    rows = "".join(f"<tr><td>{html.escape(f.name)}</td><td>{html.escape(f.tables)}</td><td>{f.rows:,}</td>"
                   f"<td>{f.p50_s:.2f}</td><td>{f.p95_s:.2f}</td><td>{f.p99_s:.2f}</td><td>{f.goal_s:g}</td>"
                   f"<td>{'met' if f.met else 'NOT met'}</td></tr>" for f in measured)
    return ("<h2>Freshness, measured</h2><table><tr><th>table</th><th>tables</th><th>rows</th><th>p50 s</th>"
            "<th>p95 s</th><th>p99 s</th><th>p95 goal s</th><th></th></tr>" + rows + "</table>"
            f'<figure><img src="{png.name}" alt="{html.escape(FRESHNESS_TITLE)}"></figure>'
            "<h2>From Prometheus</h2>")


def write_report(settings: Settings, out_dir: Path, since_seconds: float,
                 measured: list[Freshness] | None = None) -> Path:
    """The report page (``index.html`` in ``out_dir``): ``measured`` freshness first, when given, then the
    Prometheus panels of the last ``since_seconds``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    collected = collect(settings, since_seconds)
    head = _freshness_section(measured, out_dir) if measured else ""
    rows, images = [], []
    for i, panel in enumerate(collected):
        png = out_dir / f"{i + 1}-{panel.title.split(' (')[0].lower().replace(' ', '-').replace(':', '')}.png"
        plot(panel, png)
        images.append(f'<figure><img src="{png.name}" alt="{html.escape(panel.title)}"></figure>')
        for name, points in sorted(panel.series.items()):
            values = [v for _, v in points]
            rows.append(f"<tr><td>{html.escape(panel.title.split(' (')[0])}</td><td>{html.escape(name)}</td>"
                        f"<td>{values[-1]:,.2f}</td><td>{max(values):,.2f}</td><td>{panel.unit}</td></tr>")
    page = out_dir / "index.html"
    page.write_text(
        "<!doctype html><meta charset='utf-8'><title>lakehouse report</title>"
        "<style>body{font-family:sans-serif;max-width:1000px;margin:2em auto}td,th{padding:2px 10px;text-align:right}"
        "td:first-child,td:nth-child(2),th{text-align:left}img{max-width:100%}</style>"
        f"<h1>Lakehouse report</h1><p>Last {since_seconds / 60:.0f} minutes, generated "
        f"{dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M:%S} UTC from Prometheus at {settings.prometheus.address}.</p>"
        + head + "<table><tr><th>panel</th><th>series</th><th>last</th><th>max</th><th>unit</th></tr>"
        + "".join(rows) + "</table>" + "".join(images))
    return page
