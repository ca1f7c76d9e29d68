"""The settings of the Kubernetes runtime: the same typed settings, with in-cluster endpoints.

Pods get them as ``LAKEHOUSE_*`` variables from the ``lakehouse-settings`` ConfigMap
(only what differs from the defaults) and credentials from the generated Secret, so a
job reads exactly the same ``Settings`` class in both runtimes.
"""

from __future__ import annotations

from typing import Any

from lakehouse.settings import GENERATED_SECRETS, Settings
from lakehouse.settings_env import declared_settings
from lakehouse.settings_env import settings_env as lakehouse_settings_env

NAMESPACE = "lakehouse"
KAFKA_CLUSTER = "lakehouse"
IMAGE = "lakehouse"  # built from deploy/Dockerfile; the overlay pins the tag

# Service DNS name and port of each dependency inside the namespace.
SERVICES: dict[str, tuple[str, int]] = {
    "kafka": (f"{KAFKA_CLUSTER}-kafka-bootstrap", 9092),
    "s3": ("minio", 9000),
    "postgres": ("postgres", 5432),
    "metastore": ("hive-metastore", 9083),
    "mariadb": ("mysql", 3306),
    "trino": ("trino", 8080),
    "prometheus": ("prometheus", 9090),
}

# Exporters that have no pod of their own in the cluster, and the one whose port serves their metrics:
# the live aggregates and maintenance run inside the pipeline's Spark driver
# (`run pipeline --jobs clicks,aggregate,maintain`).
EXPORTERS_INSIDE = {"aggregate": "pipeline", "maintenance": "pipeline"}


def cluster_exporters(settings: Settings) -> dict[str, int]:
    """The exporters pods carry in the cluster (``lakehouse.io/exporter``), with their ports: a scrape job each."""
    return {name: port for name, port in settings.metrics.exporters().items() if name not in EXPORTERS_INSIDE}


# Where the image keeps the project, its tools and the jobs' writable state.
APP_DIR = "/opt/lakehouse"
STATE_DIR = "/var/lib/lakehouse"


def cluster_overrides() -> dict[str, Any]:
    """What the cluster changes relative to the defaults, as nested settings data."""
    overrides: dict[str, Any] = {section: {"host": host, "port": port} for section, (host, port) in SERVICES.items()}
    # Exporters must answer Prometheus from other pods; NetworkPolicies limit who may ask.
    overrides["metrics"] = {"host": "0.0.0.0"}  # noqa: S104 - inside a pod, guarded by NetworkPolicy
    overrides["pipeline"] = {"spark_deploy": "cluster"}
    overrides["run_dir"] = STATE_DIR
    overrides["tools_dir"] = f"{APP_DIR}/.tools"
    return overrides


def cluster_settings() -> Settings:
    """The Kubernetes runtime's settings, independent of this shell's LAKEHOUSE_* variables."""
    return declared_settings(cluster_overrides())


def settings_env() -> dict[str, str]:
    """``LAKEHOUSE_*`` variables that turn the defaults into the cluster's settings (no secrets)."""
    return lakehouse_settings_env(cluster_settings())


def secret_env_names() -> list[str]:
    """The Secret's keys: one ``LAKEHOUSE_*`` variable per generated credential."""
    return [f"LAKEHOUSE_{section.upper()}__{field.upper()}" for section, field in GENERATED_SECRETS]
