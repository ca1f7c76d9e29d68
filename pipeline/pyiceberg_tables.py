"""What the Spark-free writers (dimension apply, live aggregates) share about PyIceberg tables.

Creating a table idempotently with its declared properties, reading a property the newest
snapshot of the current lineage recorded, a transaction that does not copy the table's
metadata on every read, and the retry of a commit that lost a race with another writer.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Iterator

import pyarrow as pa
from pyiceberg.exceptions import (
    CommitFailedException,
    NamespaceAlreadyExistsError,
    TableAlreadyExistsError,
    ValidationException,
)
from pyiceberg.manifest import ManifestContent
from pyiceberg.schema import Schema
from pyiceberg.table import TableProperties, Transaction
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.table.snapshots import Operation, ancestors_of
from pyiceberg.table.update import _apply_table_update, _TableMetadataUpdateContext
from pyiceberg.table.update.snapshot import _OverwriteFiles
from tenacity import AttemptManager, Retrying, retry_if_exception_type, stop_after_attempt, wait_exponential

log = logging.getLogger(__name__)

# A batch of inserts deletes keys no file holds yet, an overwrite empties an empty table: the normal case, not news.
warnings.filterwarnings("ignore", message="Delete operation did not match any records")

#: attempts of a commit that lost a race with another writer (maintenance rewriting the table)
COMMIT_ATTEMPTS = 6


def ensure_table(catalog, name: str, schema: Schema, properties: dict[str, str], **layout) -> None:
    """Create ``name`` if missing; give an existing one the properties declared since it was made.

    ``layout``: PyIceberg's ``partition_spec`` and ``sort_order``, for a new table.
    """
    try:
        catalog.create_namespace(name.split(".")[0])
    except NamespaceAlreadyExistsError:
        pass
    try:
        catalog.create_table(name, schema, properties=properties, **layout)
        log.info("created %s", name)
        return
    except TableAlreadyExistsError:
        pass
    table = catalog.load_table(name)
    missing = {k: v for k, v in properties.items() if k != TableProperties.FORMAT_VERSION and table.properties.get(k) != v}
    if missing:
        with table.transaction() as tx:
            tx.set_properties(missing)


def newest_summary_with(table, key: str) -> dict[str, str]:
    """The summary of the newest snapshot in the current lineage that recorded ``key``; {} if none.

    Maintenance's commits (compaction, manifest rewrites) record no writer properties, so the
    newest snapshot is not always the one to read.
    """
    current = table.current_snapshot()
    for snapshot in ancestors_of(current, table.metadata) if current else ():
        summary = snapshot.summary.additional_properties if snapshot.summary else {}
        if key in summary:
            return summary
    return {}


def live_data_files(table) -> list:
    """The data files of the table's current snapshot."""
    current = table.current_snapshot()
    return [entry.data_file
            for manifest in (current.manifests(table.io) if current else ())
            if manifest.content == ManifestContent.DATA
            for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=True)]


class _ReplaceAll(_OverwriteFiles):
    """An overwrite that deletes every live data file, so no manifest of the parent carries on.

    PyIceberg 0.12's overwrite keeps each parent manifest none of whose live files it deletes,
    and a manifest of only deleted entries (what every overwrite leaves) is one: they pile up,
    one more a commit, and every commit reads them all, so commits grow slower without end.
    """

    def _existing_manifests(self) -> list:
        return []


def replace_contents(table, rows: pa.Table, properties: dict[str, str], before=None) -> None:
    """One snapshot: every data file of ``table`` out, ``rows`` in (one file for a small table).

    For the small tables whose one writer holds their whole content (dimensions, aggregate
    results): PyIceberg's ``overwrite`` is a delete and an append, two snapshots with a
    manifest list each, and a row-level delete reads and rewrites every file that may hold a
    changed key. Replacing the files costs one new file and one snapshot whatever changed.
    Delete files of older writers go too: they applied to the data files replaced. ``before(tx)``,
    if given, stages other changes first (a schema update) and returns snapshot properties.
    """
    # deferred: PyIceberg's private writer: kept to the one function that needs it
    from pyiceberg.io.pyarrow import _dataframe_to_data_files

    with CachedTransaction(table) as tx:
        if before is not None:  # e.g. a schema change staged in the same commit (returns snapshot properties)
            properties = {**properties, **before(tx)}
        operation = Operation.OVERWRITE if table.current_snapshot() else Operation.APPEND
        with _ReplaceAll(operation, tx, table.io, snapshot_properties=properties) as producer:
            for data_file in live_data_files(table):
                producer.delete_data_file(data_file)
            if rows.num_rows:
                for data_file in _dataframe_to_data_files(tx.table_metadata, rows, table.io,
                                                          write_uuid=producer.commit_uuid):
                    producer.append_data_file(data_file)


def commit_attempts() -> Iterator[AttemptManager]:
    """``for attempt in commit_attempts(): with attempt: ...`` retries a commit another writer beat.

    Also PyIceberg's ``ValidationException``: its own retry raises it when the snapshot the commit
    started from was expired meanwhile (maintenance), which a fresh start from the new head fixes.
    """
    return iter(Retrying(retry=retry_if_exception_type((CommitFailedException, ValidationException)), reraise=True,
                         stop=stop_after_attempt(COMMIT_ATTEMPTS), wait=wait_exponential(multiplier=0.2, max=5)))


class CachedTransaction(Transaction):
    """PyIceberg's transaction, with its metadata worked out once per staged change, without a deep copy.

    ``Transaction.table_metadata`` applies the staged updates to a deep copy of the table's
    metadata on every access, and a delete reads it three times per file it looks at: a
    batch's commit then spends most of its time copying metadata, more the more snapshots
    the table keeps (docs/cdc.md). The metadata models are immutable, so the updates applied
    once serve every read, and need no copy: the catalog's commit applies them again, with
    its checks, to what it commits.
    """

    _cached: tuple[tuple, TableMetadata] | None = None

    @property
    def table_metadata(self) -> TableMetadata:
        key = (id(self._table.metadata), len(self._updates))
        if self._cached is None or self._cached[0] != key:
            context, metadata = _TableMetadataUpdateContext(), self._table.metadata
            for update in self._updates:
                metadata = _apply_table_update(update, metadata, context)
            self._cached = (key, metadata)
        return self._cached[1]
