"""Which dimension table each change topic is applied to, and how its columns map to the source's fields."""

from __future__ import annotations

from dataclasses import dataclass

from lakehouse.catalog import pyiceberg_catalog
from lakehouse.errors import TransientError
from lakehouse.settings import Settings
from pipeline.capture.schema_history import SchemaRecord
from pipeline.capture.source_schema import to_iceberg_schema
from pipeline.cdc.changes import EnvelopeError
from pipeline.cdc.dimension_tables import dimensions
from pipeline.lake_writer.catalog_tables import ensure_table
from pipeline.tables import COMMON_PROPERTIES, UPSERT_PROPERTIES


class SchemaNotYetRecorded(TransientError):
    """A batch carries a column the capture's schema history does not name yet (read again, it will)."""


@dataclass(frozen=True)
class Target:
    source_table: str
    table: str
    key: str  # the key column, as the source names it (the change envelopes' key)
    columns: dict[str, str]  # target column -> the after-image field it is read from (cast to the column's type)
    renames: dict[str, str]  # source column -> lake column, where they differ


def targets(settings: Settings, records: dict[str, SchemaRecord], catalog=None) -> dict[str, Target]:
    """The table each change topic is applied to, by topic: created if missing.

    The seed's two tables have their declared schemas (``dimension_tables``, the same as the
    source's); any other captured table (``cdc.extra_tables``) gets the schema of the source
    table as the capture recorded it at its snapshot, so it waits for that record.
    """
    catalog = catalog or pyiceberg_catalog(settings)
    declared = dimensions(settings)
    out = {}
    for captured in settings.captured_tables:
        if captured.source in declared:
            key = declared[captured.source].key
        else:
            record = records.get(captured.source)
            if record is None:
                raise SchemaNotYetRecorded(f"no schema of {settings.mariadb.database}.{captured.source} recorded in "
                                           f"{settings.cdc_schema_topic} yet: waiting for the capture's snapshot")
            if len(record.schema.key) != 1:
                raise EnvelopeError(f"{captured.source}'s primary key has {len(record.schema.key)} columns; the "
                                    "apply keys rows on one column")
            key = record.schema.key[0]
            ensure_table(catalog, captured.table, to_iceberg_schema(record.schema, captured.renames),
                         {**COMMON_PROPERTIES, **UPSERT_PROPERTIES})
        lake_to_source = {lake: source for source, lake in captured.renames.items()}
        fields = catalog.load_table(captured.table).schema().fields
        out[settings.cdc_topic(captured.source)] = Target(
            captured.source, captured.table, key, {f.name: lake_to_source.get(f.name, f.name) for f in fields},
            dict(captured.renames))
    return out
