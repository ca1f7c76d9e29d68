"""`lakehouse run freshness-probe`: what a reader of each table sees, exported for Prometheus.

Independent of the writers: every few seconds it loads each table's current metadata
through the catalog (as any query engine would) and exports how old the newest commit
is, the snapshot count, live data/delete files and records, and the newest event time
in the files the last snapshot added. If a writer believes it committed but readers
cannot see it, this is where it shows.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass

from pyiceberg.conversions import from_bytes
from pyiceberg.manifest import ManifestEntryStatus

from lakehouse.catalog import pyiceberg_catalog
from lakehouse.settings import Settings
from pipeline import metrics
from queries.library import table_roles

log = logging.getLogger(__name__)


EVENT_TIME_COLUMN = "event_time"


@dataclass
class TableView:
    table: str
    commit_age_seconds: float
    snapshots: int
    data_files: int
    delete_files: int
    records: int
    max_event_time: float | None


def _newest_event_time(table, snapshot) -> float | None:
    """Max ``event_time`` upper bound over the data files this snapshot added (None if no such column)."""
    field = table.schema().find_field(EVENT_TIME_COLUMN, case_sensitive=False) \
        if EVENT_TIME_COLUMN in table.schema().column_names else None
    if field is None:
        return None
    newest = None
    for manifest in snapshot.manifests(table.io):
        if manifest.added_snapshot_id != snapshot.snapshot_id:
            continue
        for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=True):
            if entry.status != ManifestEntryStatus.ADDED or not entry.data_file.upper_bounds:
                continue
            raw = entry.data_file.upper_bounds.get(field.field_id)
            if raw is not None:
                micros = from_bytes(field.field_type, raw)
                newest = micros if newest is None else max(newest, micros)
    return newest / 1e6 if newest is not None else None


def look(catalog, name: str, now: float | None = None) -> TableView | None:
    """What a reader sees of ``name`` right now (None while the table does not exist)."""
    # deferred: pyiceberg loads pyarrow: only when a table is read
    from pyiceberg.exceptions import NoSuchTableError

    try:
        table = catalog.load_table(name)
    except NoSuchTableError:
        return None
    snapshot = table.current_snapshot()
    if snapshot is None:
        return None
    summary = snapshot.summary.additional_properties if snapshot.summary else {}
    return TableView(
        table=name,
        commit_age_seconds=(now or time.time()) - snapshot.timestamp_ms / 1000,
        snapshots=len(table.metadata.snapshots),
        data_files=int(summary.get("total-data-files", 0)),
        delete_files=int(summary.get("total-delete-files", 0)),
        records=int(summary.get("total-records", 0)),
        max_event_time=_newest_event_time(table, snapshot),
    )


def probe_once(settings: Settings, catalog=None) -> list[TableView]:
    catalog = catalog or pyiceberg_catalog(settings)
    views = []
    for name in table_roles(settings).values():
        try:
            view = look(catalog, name)
        except Exception as exc:  # noqa: BLE001 - one unreadable table must not blind the others
            metrics.PROBE_ERRORS.labels(name).inc()
            log.warning("probe: cannot read %s: %s", name, exc)
            continue
        if view is None:
            continue
        metrics.TABLE_COMMIT_AGE.labels(name).set(view.commit_age_seconds)
        metrics.TABLE_SNAPSHOTS.labels(name).set(view.snapshots)
        metrics.TABLE_DATA_FILES.labels(name).set(view.data_files)
        metrics.TABLE_DELETE_FILES.labels(name).set(view.delete_files)
        metrics.TABLE_RECORDS.labels(name).set(view.records)
        if view.max_event_time is not None:
            metrics.TABLE_MAX_EVENT_TIME.labels(name).set(view.max_event_time)
        views.append(view)
    return views


def run(settings: Settings, stop: threading.Event) -> None:
    catalog = pyiceberg_catalog(settings)
    while not stop.is_set():
        began = time.monotonic()
        probe_once(settings, catalog)
        stop.wait(max(0.0, settings.metrics.probe_interval_seconds - (time.monotonic() - began)))
