"""Every setting of the lakehouse, declared once: the root ``Settings`` and the names of the catalog's tables;
its sections live beside it by concept (``service_settings``: where each service listens; ``job_settings``: how
the Spark jobs behave; ``cdc_settings``: which source tables are captured).

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
from typing import Any

from pydantic import BaseModel, Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from lakehouse.cdc_settings import CapturedTable, CdcSettings
from lakehouse.errors import LakehouseError
from lakehouse.job_settings import MaintenanceSettings, PipelineSettings
from lakehouse.service_settings import (
    KafkaSettings,
    MariaDBSettings,
    MetastoreSettings,
    MetricsSettings,
    PostgresSettings,
    PrometheusSettings,
    QuerySettings,
    S3Settings,
    TrinoSettings,
)
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
CREDENTIALS_FILE = "credentials.json"


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
