"""Every table of the lake, declared once: its name, which job writes it, its key and source, how it is kept.

``Settings.tables`` builds the registry from the catalog's table names and the captured tables
(``cdc.extra_tables``); the jobs, maintenance, the query library and the manifests read it, so
a table added to the settings is captured, applied, maintained and listed without a line of
code. A table's *role* is its name in the query library (``{clicks}``, ``{orders}``).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

#: the job that writes a table (``lakehouse run <job>``)
Writer = Literal["clicks", "dims", "aggregate", "batch"]
#: how a table's files are kept in shape: Iceberg's Spark procedures compact and rewrite them
#: (``lakehouse run maintain``), or its writer folds them itself (the CDC apply's key index knows
#: every live row, and a Spark rewrite would rewrite every file a delete touches); maintenance
#: expires both kinds' snapshots and removes their orphan files
Upkeep = Literal["compaction", "writer-folds"]


class LakeTable(BaseModel):
    """One table of the lake."""

    model_config = ConfigDict(frozen=True)

    role: str = Field(description="The table's name in the query library and the settings (`clicks`, `orders`).")
    table: str = Field(description="The Iceberg table, 'namespace.table'.")
    writer: Writer
    upkeep: Upkeep
    key: str | None = Field(None, description="The key column (its source's name); None: the source's primary key.")
    source: str | None = Field(None, description="The source-database table it is captured from, if any.")
    renames: dict[str, str] = Field(default_factory=dict, description="Source column -> lake column.")
    reads: str | None = Field(None, description="The role of the table whose snapshots this table's writer reads "
                                                "incrementally, its position kept in this table's snapshots: expiry "
                                                "keeps that table's snapshots from the position on.")


def registry(names: dict[str, str], extra: list) -> tuple[LakeTable, ...]:
    """The lake's tables: the seed's, by role from ``names`` (``CatalogSettings.tables()``), then each captured
    table of ``extra`` (``cdc.extra_tables``: source, table, renames, role), keyed on its source's primary key."""
    seed = (
        LakeTable(role="clicks", table=names["clicks"], writer="clicks", upkeep="compaction"),
        LakeTable(role="dead_letter", table=names["dead_letter"], writer="clicks", upkeep="compaction"),
        LakeTable(role="products", table=names["products"], writer="dims", upkeep="writer-folds", key="productId",
                  source="products"),
        LakeTable(role="members", table=names["members"], writer="dims", upkeep="writer-folds", key="userid",
                  source="user_member", renames={"memberLevel": "member_level"}),
        LakeTable(role="product_views", table=names["product_views"], writer="aggregate", upkeep="compaction",
                  reads="clicks"),
        LakeTable(role="member_activity", table=names["member_activity"], writer="aggregate", upkeep="compaction",
                  reads="clicks"),
        LakeTable(role="daily_users", table=names["daily_users"], writer="batch", upkeep="compaction"),
    )
    tables = (*seed, *(LakeTable(role=t.role or t.source, table=t.table, writer="dims", upkeep="writer-folds",
                                 source=t.source, renames=t.renames) for t in extra))
    for field, what in (("role", "role (a captured table's is its source's name unless it gives a role)"),
                        ("table", "Iceberg table"), ("source", "source table")):
        values = [getattr(t, field) for t in tables if getattr(t, field) is not None]
        twice = sorted({v for v in values if values.count(v) > 1})
        if twice:
            raise ValueError(f"two tables share the {what} {', '.join(twice)}: check cdc.extra_tables (each may "
                             "name its own role) and the catalog's table names")
    return tables
