"""One batch of changes into one dimension table: the newest change per key, in one Iceberg commit.

Why on the driver with PyIceberg rather than Spark's ``MERGE INTO``: a batch is a few hundred
changes against a table of thousands of rows. The MERGE ran two Spark jobs a batch (2.0 s on
an idle machine); with the whole system on two cores its tasks queued behind the click
batches', a MERGE took 5-9 s and a price change took 17 s (p95) to reach the table
(docs/performance.md, "Fourth round"). Here a batch is milliseconds of Arrow work and one
commit carrying the topic's offsets, atomic as the MERGE was (``DimensionWriter`` says how it
writes). Applying a batch twice gives the same rows, so a replay after a crash is harmless
(``pipeline.cdc.apply``).
"""

from __future__ import annotations

import datetime as dt
import json
import logging
from decimal import Decimal, InvalidOperation

import pyarrow as pa
import pyarrow.compute as pc
from pyiceberg.expressions import In

from pipeline.pyiceberg_tables import CachedTransaction, commit_attempts, replace_contents

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

    The job is the table's only writer of rows (maintenance rewrites files, never rows), so
    the writer holds what the table holds, read on ``reload`` (start, recovery, a commit that
    lost a race) and following each commit. While the table is small (``whole_table_rows``,
    a product catalogue or member levels) a batch replaces its content: one file, one
    snapshot, no file read. Measured with the whole system running, the row-level way
    (below) kept the dimension apply at 31 % of a core for 20 changes/s: each batch rewrote
    the files holding its keys and added one more, 59 files for 112 rows after 3 minutes.

    A larger table takes the row-level way: a copy-on-write delete of the batch's keys that
    exist, and an append of their after-images, in one transaction. Only existing keys are
    deleted: a delete makes PyIceberg read every file whose statistics might hold a key, and
    a new key's string falls inside most files' bounds.
    """

    def __init__(self, catalog, table: str, key: str, columns: dict[str, str], whole_table_rows: int = 50_000):
        self.catalog, self.name, self.key, self.columns = catalog, table, key, columns
        self.whole_table_rows = whole_table_rows
        self.reload()

    def reload(self) -> None:
        """Read the table's current metadata and content (its keys only, when it is large)."""
        self.table = self.catalog.load_table(self.name)
        self.schema = self.table.schema().as_arrow()
        keys = self.table.scan(selected_fields=(self.key,)).to_arrow().column(self.key).to_pylist()
        self.keys: set[str] = set(keys)
        self.rows: dict[str, dict] | None = None
        if len(keys) <= self.whole_table_rows:
            self.rows = {row[self.key]: row for row in self.table.scan().to_arrow().to_pylist()}

    def apply(self, changes: pa.Table, properties: dict[str, str]) -> None:
        """The batch's newest change per key into the table, with ``properties``, in one commit."""
        newest = newest_per_key(changes)
        batch_keys = newest.column("pk").to_pylist()
        upserted = newest.filter(pc.not_equal(newest.column("op"), "d")).column("pk").to_pylist()
        for attempt in commit_attempts():
            with attempt:
                if attempt.retry_state.attempt_number > 1:
                    log.info("dims: %s changed under the commit; applying the batch again", self.name)
                    self.reload()
                images = after_images(newest, self.columns, self.schema)
                rows: dict[str, dict] | None
                if self.rows is not None and len(self.rows) + len(upserted) <= self.whole_table_rows:
                    rows = self._replace(batch_keys, upserted, images, properties)
                else:
                    self._delete_and_append(batch_keys, images, properties)
                    rows = None  # the table is large: only its keys are kept
        self.rows = rows
        self.keys.difference_update(batch_keys)
        self.keys.update(upserted)

    def _replace(self, batch_keys: list[str], upserted: list[str], images: pa.Table,
                 properties: dict[str, str]) -> dict[str, dict]:
        rows = dict(self.rows or {})
        for key in batch_keys:
            rows.pop(key, None)
        rows.update(zip(upserted, images.to_pylist(), strict=True))
        replace_contents(self.table, pa.Table.from_pylist(list(rows.values()), schema=self.schema), properties)
        return rows

    def _delete_and_append(self, batch_keys: list[str], images: pa.Table, properties: dict[str, str]) -> None:
        existing = [k for k in batch_keys if k in self.keys]
        with CachedTransaction(self.table) as tx:
            if existing:
                tx.delete(In(term=self.key, literals=existing), snapshot_properties=properties)
            tx.append(images, snapshot_properties=properties)  # also when empty: it records the offsets
