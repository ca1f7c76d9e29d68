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


EXPORTER_LABEL = "lakehouse.io/exporter"


def kubernetes_scrape_config(settings: Settings, namespace: str, kafka_cluster: str,
                             exporters: dict[str, int]) -> dict[str, Any]:
    """Prometheus config for Kubernetes: pods found by the API, one job per exporter a pod carries.

    A pod opts in with the label ``lakehouse.io/exporter: <exporter>``; the port comes from
    settings, so no manifest restates it. ``exporters`` are the ones the cluster runs as pods of
    their own (a job without targets would only ever show an empty target list). Strimzi's Kafka
    pods are scraped on their metrics reporter port.
    """
    interval = f"{settings.prometheus.scrape_interval_seconds}s"
    label = "__meta_kubernetes_pod_label_" + EXPORTER_LABEL.replace(".", "_").replace("/", "_")

    def pod_job(job: str, keep: list[dict[str, Any]], port: int) -> dict[str, Any]:
        return {
            "job_name": job,
            "kubernetes_sd_configs": [{"role": "pod", "namespaces": {"names": [namespace]}}],
            "relabel_configs": keep + [
                {"source_labels": ["__meta_kubernetes_pod_ip"], "target_label": "__address__",
                 "replacement": f"$1:{port}"},
                {"source_labels": ["__meta_kubernetes_pod_name"], "target_label": "pod"},
            ],
        }

    jobs = [{"job_name": "prometheus", "static_configs": [{"targets": [f"localhost:{settings.prometheus.port}"]}]}]
    for job, port in exporters.items():
        jobs.append(pod_job(job, [{"source_labels": [label], "regex": job, "action": "keep"}], port))
    # The broker pods only: Strimzi's entity operator carries strimzi.io/kind=Kafka too, but no exporter,
    # so keeping it would show a down target and fire the broker-down alert for ever.
    jobs.append(pod_job("kafka", [{"source_labels": ["__meta_kubernetes_pod_label_strimzi_io_name"],
                                   "regex": f"{kafka_cluster}-kafka", "action": "keep"}], STRIMZI_METRICS_PORT))
    return {
        "global": {"scrape_interval": interval, "evaluation_interval": interval},
        "rule_files": [RULES_FILE],
        "scrape_configs": jobs,
    }


STRIMZI_METRICS_PORT = 9404  # Strimzi's metrics port on Kafka pods (metricsConfig)


def render(settings: Settings) -> str:
    return yaml.safe_dump(scrape_config(settings), sort_keys=False)
