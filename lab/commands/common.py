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


def record_figures(figures) -> None:
    """Append the figures as dated rows to docs/benchmarks.md (a command's ``--record``)."""
    from lab.bench.record import BENCHMARKS_MD, append_rows
    from lakehouse.settings import REPO_ROOT

    append_rows(figures)
    console.print(f"appended {len(figures)} rows to {BENCHMARKS_MD.relative_to(REPO_ROOT)}")
