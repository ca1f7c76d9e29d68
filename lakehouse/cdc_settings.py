"""Which source tables the CDC capture follows, and the Iceberg table each becomes.

Part of :class:`lakehouse.settings.Settings` (section ``cdc``, ``LAKEHOUSE_CDC__*``). Both
runtimes read it: the local stack and the Kubernetes manifests create one topic per captured
table from it (``Settings.topics``), the capture follows exactly these tables, and the apply
job writes each into its Iceberg table, whose schema comes from the source table's columns
and primary key at the first snapshot (``pipeline.capture.source_schema``).
"""

from __future__ import annotations

from pydantic import BaseModel, Field, field_validator


class CapturedTable(BaseModel):
    """One source table and the Iceberg table its changes are applied to."""

    source: str = Field(description="The table's name in the source database.")
    table: str = Field(description="The Iceberg table, 'namespace.table'.")
    renames: dict[str, str] = Field(default_factory=dict,
                                    description="Source column -> lake column, where the lake names one otherwise.")
    role: str | None = Field(None, description="The table's name in the query library ({role}); the source table's "
                                               "name if not given (give one when that is a role already taken).")

    @field_validator("table")
    @classmethod
    def _qualified(cls, value: str) -> str:
        if value.count(".") != 1:
            raise ValueError(f"table name {value!r} must be 'namespace.table'")
        return value


class CdcSettings(BaseModel):
    """The capture's tables. Empty: the seed's two, into ``catalog.products_table`` and ``catalog.members_table``."""

    extra_tables: list[CapturedTable] = Field(
        default_factory=list,
        description="Source tables captured beside the seed's products and user_member, e.g. "
                    "LAKEHOUSE_CDC__EXTRA_TABLES='[{\"source\": \"orders\", \"table\": \"dim_db.orders\"}]'.")
