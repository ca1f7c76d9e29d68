"""`lakehouse report`: an HTML page and PNG plots of a past window, from Prometheus."""

from __future__ import annotations

from typing import Annotated

import typer

from cli.common import console, settings_or_exit


def report(
    since: Annotated[str, typer.Option(help="Window to report: 15m, 1h, 90s.")] = "15m",
    out: Annotated[str | None, typer.Option(help="Output folder (default results/report-<time>).")] = None,
) -> None:
    """HTML page + PNG plots from Prometheus: latency quantiles, freshness, produced vs committed, lag."""
    from pathlib import Path

    from lab.report import PrometheusError, write_report
    from lakehouse.settings import results_path
    from loadgen.run import parse_duration

    try:
        seconds = parse_duration(since)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--since") from None
    folder = Path(out) if out else results_path("report")
    try:
        with console.status(f"reading {since} of metrics from Prometheus and plotting..."):
            page = write_report(settings_or_exit(), folder, seconds)
    except PrometheusError as exc:
        console.print(f"[red]{exc}[/red]")
        raise typer.Exit(2) from None
    console.print(f"report: {page}")
