"""The one module that imports PyIceberg's private classes; the lake writer uses them through the names here.

PyIceberg (0.x) has no public row delta and no transaction that keeps its staged metadata, so
the lake writer builds on five private pieces, imported here and nowhere else: the fast-append
snapshot producer (``RowDelta`` extends it with delete manifests), the overwrite producer, the
writer of Arrow rows as data files, the function that applies a staged update to table
metadata, and the Hive catalog's conversion of a metastore entry into a table (which
``HeldMetadataHiveCatalog`` overrides). ``RowDelta`` (``row_delta``) also overrides the fast-append
producer's private hooks. A PyIceberg upgrade that moves these breaks this module and that class,
and the writer's tests say so at once.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

from hive_metastore.ttypes import Table as HiveTable
from pyiceberg.catalog.hive import HiveCatalog
from pyiceberg.io.pyarrow import _dataframe_to_data_files as data_files_of
from pyiceberg.table import CommitTableResponse, Table, Transaction
from pyiceberg.table.metadata import TableMetadata, TableMetadataV1, TableMetadataV2, TableMetadataV3
from pyiceberg.table.update import _apply_table_update, _TableMetadataUpdateContext
from pyiceberg.table.update.snapshot import _FastAppendFiles as FastAppendFiles
from pyiceberg.table.update.snapshot import _OverwriteFiles as OverwriteFiles

__all__ = ["CachedTransaction", "FastAppendFiles", "HeldMetadataHiveCatalog", "OverwriteFiles", "data_files_of"]

#: the metastore's parameter naming a table's current metadata file
METADATA_LOCATION = "metadata_location"


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


class _NotDeepCopied:
    """Mixed into a table metadata class: a deep copy of a frozen model that no update changes in place is itself."""

    def __deepcopy__(self, memo=None):
        return self


class SharedTableMetadataV1(_NotDeepCopied, TableMetadataV1):
    pass


class SharedTableMetadataV2(_NotDeepCopied, TableMetadataV2):
    pass


class SharedTableMetadataV3(_NotDeepCopied, TableMetadataV3):
    pass


_SHARED: dict[type, Any] = {TableMetadataV1: SharedTableMetadataV1, TableMetadataV2: SharedTableMetadataV2,
                            TableMetadataV3: SharedTableMetadataV3}


def shared_metadata(metadata: TableMetadata) -> TableMetadata:
    """``metadata`` as an instance of a subclass whose deep copy is the instance itself.

    PyIceberg deep-copies the whole table metadata at the end of every commit it stages
    (``update_table_metadata``), in case a later update changes it in place; every metadata model
    is frozen and every update makes new lists, so nothing does. The copy is the largest part of a
    commit's Python time, and it grows with the snapshots kept. Metadata derived from this instance
    by an update keeps its class, so a writer's commits never copy it again. (Module-level classes:
    the click job sends the metadata to its tasks, pickled.)
    """
    shared = _SHARED.get(type(metadata))
    if shared is None:  # shared already, or a format this module does not know: copied as PyIceberg does
        return metadata
    return shared.model_construct(_fields_set=metadata.model_fields_set, **dict(metadata))


class HeldMetadataHiveCatalog(HiveCatalog):
    """PyIceberg's Hive catalog, without reading again a metadata file it has just written or read.

    A Hive commit reads the table's current metadata file from the object store and parses it,
    under the metastore's lock, to check the commit's requirements; so does every load. A metadata
    file is never changed and its name is unique, so while the metastore points at a location
    this catalog wrote or read, the metadata it holds for it is the file's content: it is used
    instead (the newest ``HELD`` are kept). A writer that commits every fraction of a second reads
    back its own last commit each time otherwise. The metadata it loads is ``shared_metadata``: its
    commits do not deep-copy it.
    """

    HELD = 4

    def __init__(self, name: str, **properties: str):
        super().__init__(name, **properties)
        self._held: OrderedDict[str, TableMetadata] = OrderedDict()
        self._held_lock = threading.Lock()  # a job's threads share a catalog (the file merges commit from one)

    def _convert_hive_into_iceberg(self, table: HiveTable) -> Table:
        location = (table.parameters or {}).get(METADATA_LOCATION)
        with self._held_lock:
            metadata = self._held.get(location) if location else None
        if metadata is None or location is None:
            loaded = super()._convert_hive_into_iceberg(table)
            loaded.metadata = shared_metadata(loaded.metadata)
            self._hold(loaded.metadata_location, loaded.metadata)
            return loaded
        return Table(identifier=(table.dbName, table.tableName), metadata=metadata, metadata_location=location,
                     io=self._load_file_io(metadata.properties, location), catalog=self)

    def commit_table(self, table: Table, requirements: tuple, updates: tuple) -> CommitTableResponse:
        response = super().commit_table(table, requirements, updates)
        self._hold(response.metadata_location, shared_metadata(response.metadata))
        return response

    def _hold(self, location: str, metadata: TableMetadata) -> None:
        with self._held_lock:
            self._held[location] = metadata
            self._held.move_to_end(location)
            while len(self._held) > self.HELD:
                self._held.popitem(last=False)
