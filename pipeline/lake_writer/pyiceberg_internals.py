"""The one module that imports PyIceberg's private classes; the lake writer uses them through the names here.

PyIceberg (0.x) has no public row delta and no transaction that keeps its staged metadata, so
the lake writer builds on four private pieces, imported here and nowhere else: the fast-append
snapshot producer (``RowDelta`` extends it with delete manifests), the overwrite producer, the
writer of Arrow rows as data files, and the function that applies a staged update to table
metadata. ``RowDelta`` (``row_delta``) also overrides the fast-append producer's private hooks. A
PyIceberg upgrade that moves these breaks this module and that class, and the writer's tests say so at once.
"""

from __future__ import annotations

from pyiceberg.io.pyarrow import _dataframe_to_data_files as data_files_of
from pyiceberg.table import Transaction
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.table.update import _apply_table_update, _TableMetadataUpdateContext
from pyiceberg.table.update.snapshot import _FastAppendFiles as FastAppendFiles
from pyiceberg.table.update.snapshot import _OverwriteFiles as OverwriteFiles

__all__ = ["CachedTransaction", "FastAppendFiles", "OverwriteFiles", "data_files_of"]


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
