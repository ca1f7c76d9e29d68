"""A batch's changes as rows: each key's newest change, and the after-images in the table's types.

The after-images are read out of the change records' own text (the ``envelope`` column of
``pipeline.cdc.changes``). A chunk of records is read at once by Arrow's JSON reader, only
the after-image's fields, when every value is what the source sends for its column (text
for text, decimals and timestamps, a number for an integer), and converted in one cast a
column; anything else (a value of another JSON type, a number that does not fit) sends the
chunk down the value-by-value path, where a value that does not fit its column reads null.
"""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal, InvalidOperation

import msgspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pa_json

from pipeline.cdc.changes import record_lines

_decode = msgspec.json.Decoder().decode


class _AfterOnly(msgspec.Struct):
    after: msgspec.Raw = msgspec.Raw(b"null")


_after_only = msgspec.json.Decoder(_AfterOnly).decode

def newest_per_key(changes: pa.Table) -> pa.Table:
    """Each key's last change in source (binlog) order, whatever order the batch arrived in."""
    if changes.num_rows == 0 or pc.count_distinct(changes.column("pk")).as_py() == changes.num_rows:
        return changes  # every key once (a snapshot's batches): no sort of 200,000 keys, no copy of the records
    order = pc.sort_indices(changes, sort_keys=[("pk", "ascending"), ("order_key", "ascending")])
    keys = changes.column("pk").take(order)
    last = np.ones(len(keys), dtype=bool)  # the last of each key's run: the next row has another key
    last[:-1] = pc.not_equal(keys[:-1], keys[1:]).to_numpy(zero_copy_only=False)
    return changes.take(np.sort(order.to_numpy()[last]))


def after_images(changes: pa.Table, columns: dict[str, str], schema: pa.Schema) -> pa.Table:
    """The after-images of the non-delete changes, as rows of the table's ``schema``.

    ``columns`` maps each table column to the source field it comes from (a column it does not
    name, one a user added to the table, reads null). Values convert the
    way a cast would: a value that does not fit the column's type reads null (the source
    database enforces its own types, so this only guards the lake against surprises).
    A column converts in one Arrow cast; only a column that holds a surprise goes value by value.
    Images already read with the records (an ``image`` column, ``pipeline.cdc.changes``) are not
    read from the text again.
    """
    upserts = _upserts(changes)
    if "image" in upserts.column_names and upserts.num_rows:
        read = _from_struct(upserts.column("image").combine_chunks(), columns, schema)
        if read is not None:
            return read
    records = upserts.column("envelope")
    parts = [_images(records.slice(start, IMAGE_CHUNK).combine_chunks(), columns, schema)
             for start in range(0, upserts.num_rows, IMAGE_CHUNK)]
    return pa.concat_tables(parts) if parts else schema.empty_table()


def image_struct(columns: dict[str, str], schema: pa.Schema) -> pa.StructType | None:
    """The after-image's fields as Arrow's JSON reader reads them for a table of ``schema`` (each source field
    with the JSON type the capture sends for its column), or None when a column's type is one only the
    value-by-value path converts."""
    kinds: dict[str, pa.DataType] = {}
    for field in schema:
        source = columns.get(field.name)
        kind = None if source is None else _json_kind(field.type)
        if source is not None and (kind is None or kinds.setdefault(source, kind) != kind):
            return None
    return pa.struct(list(kinds.items())) if kinds else None


#: after-images decoded at a time: a snapshot batch of 200,000 decoded at once held ~200 MB of Python dicts
IMAGE_CHUNK = 20_000


def _upserts(changes: pa.Table) -> pa.Table:
    deletes = pc.equal(changes.column("op"), "d")
    return changes.filter(pc.invert(deletes)) if pc.any(deletes).as_py() else changes  # no copy when none

def after_fields(changes: pa.Table) -> set[str]:
    """The source fields the batch's after-images hold (a DDL may have added one).

    Read from its first and last after-image in binlog order, not from every one: a row image
    holds every column the table had when it was written, and columns only come (a drop stops
    the capture until accepted, which the first image still shows), so the two bound every
    image between them; decoding every image would cost a large snapshot batch dearly.
    """
    upserts = _upserts(changes)
    if upserts.num_rows == 0:
        return set()
    order = upserts.column("order_key")
    ends = {pc.index(order, value).as_py() for value in pc.min_max(order).values()}
    fields: set[str] = set()
    for at in ends:
        fields.update(_decode(_after_only(upserts.column("envelope")[at].as_py()).after))
    return fields


def _images(records: pa.Array, columns: dict[str, str], schema: pa.Schema) -> pa.Table:
    return _read_images(records, columns, schema) or _decode_images(records.to_pylist(), columns, schema)


def _json_kind(kind: pa.DataType) -> pa.DataType | None:
    """The JSON type the capture sends for a column of ``kind`` (None: a type only the value path converts)."""
    if pa.types.is_integer(kind):
        return pa.int64()
    if pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_decimal(kind) \
            or pa.types.is_timestamp(kind):
        return pa.string()  # decimals as their exact text, timestamps as ISO-8601 text (pipeline.capture.envelope)
    return None


def _read_images(records: pa.Array, columns: dict[str, str], schema: pa.Schema) -> pa.Table | None:
    """The images read by Arrow's JSON reader and cast a column at a time, or None if any value is a surprise."""
    kinds = image_struct(columns, schema)
    lines = record_lines(records)
    if lines is None or kinds is None:
        return None
    try:
        read = pa_json.read_json(lines, parse_options=pa_json.ParseOptions(
            explicit_schema=pa.schema([("after", kinds)]), unexpected_field_behavior="ignore"))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None  # a value of another JSON type
    if read.num_rows != len(records):
        return None
    return _from_struct(read.column("after").combine_chunks(), columns, schema)


def _from_struct(after: pa.StructArray, columns: dict[str, str], schema: pa.Schema) -> pa.Table | None:
    """Rows of ``schema`` from after-images read as a struct, each column in one cast; None when the struct
    lacks a field or holds a value that does not fit its column (the value-by-value path then decides)."""
    kinds = image_struct(columns, schema)
    if kinds is None or after.null_count:
        return None
    for field in kinds:
        index = after.type.get_field_index(field.name)
        if index < 0 or after.type.field(index).type != field.type:
            return None  # read before the table had this column (or another type): the text has it
    try:
        arrays = [pa.nulls(len(after), field.type) if columns.get(field.name) is None
                  else pc.cast(pc.struct_field(after, columns[field.name]), field.type) for field in schema]
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None  # a value that does not fit its column
    return pa.Table.from_arrays(arrays, schema=schema)


def _decode_images(records: list[str], columns: dict[str, str], schema: pa.Schema) -> pa.Table:
    images = [_decode(_after_only(record).after) for record in records]
    arrays = []
    for field in schema:
        source = columns.get(field.name)
        values = [None] * len(images) if source is None else [image.get(source) for image in images]
        arrays.append(_column(values, field.type))
    return pa.Table.from_arrays(arrays, schema=schema)


def _column(values: list, kind: pa.DataType) -> pa.Array:
    """``values`` as an array of ``kind``: one cast when they are what the source sends, else one by one."""
    try:
        if pa.types.is_string(kind) or pa.types.is_large_string(kind):
            if all(v is None or isinstance(v, str) for v in values):
                return pa.array(values, type=kind)
        elif pa.types.is_integer(kind):
            if all(v is None or (isinstance(v, int) and not isinstance(v, bool)) for v in values):
                return pa.array(values, type=kind)
        elif pa.types.is_decimal(kind) or pa.types.is_timestamp(kind):
            if all(v is None or isinstance(v, str) for v in values):
                return pc.cast(pa.array(values, type=pa.string()), kind)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, OverflowError):
        pass
    return pa.array([_convert(v, kind) for v in values], type=kind)


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
            whole, bits = int(str(value)), kind.bit_width
            low, high = (-(2 ** (bits - 1)), 2 ** (bits - 1)) if pa.types.is_signed_integer(kind) else (0, 2 ** bits)
            return whole if low <= whole < high else None
        if pa.types.is_timestamp(kind):
            stamp = dt.datetime.fromisoformat(str(value).replace("Z", "+00:00"))
            return stamp if stamp.tzinfo else stamp.replace(tzinfo=dt.timezone.utc)
    except (ValueError, TypeError, InvalidOperation):
        return None
    raise TypeError(f"no conversion into {kind} (add it here when a dimension gets such a column)")


def json_text(value) -> str:
    """A non-string JSON value as a string column reads it (``1.5``, ``true``, ``{"a":1}``)."""
    return json.dumps(value, separators=(",", ":"))
