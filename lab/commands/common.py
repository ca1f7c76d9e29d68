"""What the harness's commands share beyond the CLI's own helpers (``cli.common``)."""

from __future__ import annotations

from cli.common import console


def run_report(settings, out, seconds: float) -> None:
    """Plots of the run from Prometheus beside the figures (skipped, saying why, if Prometheus is down)."""
    from lab.report import PrometheusError, write_report

    try:
        console.print(f"report with plots: {write_report(settings, out / 'report', seconds + 60)}")
    except PrometheusError as exc:
        console.print(f"no report: {exc}")
