"""One batch of changes into one dimension table: the newest change per key, in one Iceberg commit.

Why on the driver with PyIceberg rather than Spark's ``MERGE INTO``: a batch is a few hundred
changes against a table of thousands of rows. The MERGE ran two Spark jobs a batch (2.0 s on
an idle machine); with the whole system on two cores its tasks queued behind the click
batches', a MERGE took 5-9 s and a price change took 17 s (p95) to reach the table
(docs/performance.md, "Fourth round"). Here a batch is milliseconds of Arrow work and one
commit: a delete of the batch's keys (copy-on-write: a file holding one of them is rewritten
without it) and an append of their newest after-images, both snapshots carrying the topic's
offsets, in one transaction - atomic, as the MERGE was. Applying a batch twice gives the
same rows, so a replay after a crash is harmless (``pipeline.cdc.apply``).
"""

from __future__ import annotations

import datetime as dt
import json
import logging
from decimal import Decimal, InvalidOperation

import pyarrow as pa
import pyarrow.compute as pc
from pyiceberg.expressions import In

from pipeline.pyiceberg_tables import CachedTransaction, commit_attempts

log = logging.getLogger(__name__)

def newest_per_key(changes: pa.Table) -> pa.Table:
    """Each key's last change in source (binlog) order, whatever order the batch arrived in."""
    if changes.num_rows == 0:
        return changes
    order = pc.sort_indices(changes, sort_keys=[("order_key", "ascending")]).to_pylist()
    last: dict[str, int] = {}
    for index, key in zip(order, changes.column("pk").take(order).to_pylist(), strict=True):
        last[key] = index
    return changes.take(sorted(last.values()))


def after_images(changes: pa.Table, columns: dict[str, str], schema: pa.Schema) -> pa.Table:
    """The after-images of the non-delete changes, as rows of the table's ``schema``.

    ``columns`` maps each table column to the source field it comes from (a column it does not
    name, one a user added to the table, reads null). Values convert the
    way a cast would: a value that does not fit the column's type reads null (the source
    database enforces its own types, so this only guards the lake against surprises).
    """
    upserts = changes.filter(pc.not_equal(changes.column("op"), "d"))
    images = [json.loads(text) for text in upserts.column("after").to_pylist()]
    arrays = []
    for field in schema:
        source = columns.get(field.name)
        values = [None if source is None else _convert(image.get(source), field.type) for image in images]
        arrays.append(pa.array(values, type=field.type))
    return pa.Table.from_arrays(arrays, schema=schema)


def _convert(value, kind: pa.DataType):
    if value is None:
        return None
    try:
        if pa.types.is_string(kind) or pa.types.is_large_string(kind):
            return value if isinstance(value, str) else json_text(value)
        if pa.types.is_decimal(kind):
            number = Decimal(str(value)).quantize(Decimal(1).scaleb(-kind.scale))
            return number if len(number.as_tuple().digits) <= kind.precision else None
        if pa.types.is_integer(kind):
            return int(str(value))
        if pa.types.is_timestamp(kind):
            stamp = dt.datetime.fromisoformat(str(value).replace("Z", "+00:00"))
            return stamp if stamp.tzinfo else stamp.replace(tzinfo=dt.timezone.utc)
    except (ValueError, TypeError, InvalidOperation):
        return None
    raise TypeError(f"no conversion into {kind} (add it here when a dimension gets such a column)")


def json_text(value) -> str:
    """A non-string JSON value as a string column reads it (``1.5``, ``true``, ``{"a":1}``)."""
    return json.dumps(value, separators=(",", ":"))


class DimensionWriter:
    """Applies batches to one dimension table through a catalog of its own (one thread uses it).

    It keeps the set of keys the table holds, so that a batch deletes only keys that exist: a
    delete makes PyIceberg read every file whose statistics might hold one of its keys, and a
    new key's string falls inside most files' bounds, so deleting the CDC benchmark's inserted
    keys too read every file of the table each batch. The set is read from the table on
    ``reload`` (start, recovery, a commit that lost a race) and follows each commit; the job is
    the tables' only writer of rows (maintenance rewrites files, never keys).
    """

    def __init__(self, catalog, table: str, key: str, columns: dict[str, str]):
        self.catalog, self.name, self.key, self.columns = catalog, table, key, columns
        self.reload()

    def reload(self) -> None:
        """Read the table's current metadata and its keys."""
        self.table = self.catalog.load_table(self.name)
        keys = self.table.scan(selected_fields=(self.key,)).to_arrow().column(self.key)
        self.keys: set[str] = set(keys.to_pylist())

    def apply(self, changes: pa.Table, properties: dict[str, str]) -> None:
        """Delete the batch's existing keys and append their newest after-images, in one commit."""
        newest = newest_per_key(changes)
        batch_keys = newest.column("pk").to_pylist()
        upserted = set(newest.filter(pc.not_equal(newest.column("op"), "d")).column("pk").to_pylist())
        for attempt in commit_attempts():
            with attempt:
                if attempt.retry_state.attempt_number > 1:
                    log.info("dims: %s changed under the commit; applying the batch again", self.name)
                    self.reload()
                rows = after_images(newest, self.columns, self.table.schema().as_arrow())
                existing = [k for k in batch_keys if k in self.keys]
                with CachedTransaction(self.table) as tx:
                    if existing:
                        tx.delete(In(self.key, existing), snapshot_properties=properties)
                    tx.append(rows, snapshot_properties=properties)  # also when empty: it records the offsets
        self.keys.difference_update(batch_keys)
        self.keys.update(upserted)
