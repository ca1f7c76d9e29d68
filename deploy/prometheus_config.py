"""Prometheus scrape configuration, generated from settings for both runtimes."""

from __future__ import annotations

from typing import Any

import yaml

from lakehouse.settings import Settings


RULES_FILE = "lakehouse-rules.yml"


def scrape_config(settings: Settings) -> dict[str, Any]:
    """Prometheus config for the local stack: one job per exporter, all on loopback; rules beside it."""
    interval = f"{settings.prometheus.scrape_interval_seconds}s"
    host = settings.metrics.host
    jobs = [
        {"job_name": "prometheus", "static_configs": [{"targets": [settings.prometheus.address]}]},
        {"job_name": "s3", "static_configs": [{"targets": [f"{settings.s3.host}:{settings.s3.metrics_port}"]}]},
    ]
    for job, port in settings.metrics.exporters().items():
        jobs.append({"job_name": job, "static_configs": [{"targets": [f"{host}:{port}"]}]})
    return {
        "global": {"scrape_interval": interval, "evaluation_interval": interval},
        "rule_files": [RULES_FILE],
        "scrape_configs": jobs,
    }


def render(settings: Settings) -> str:
    return yaml.safe_dump(scrape_config(settings), sort_keys=False)
