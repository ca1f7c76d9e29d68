"""The change topics' records as rows the apply job works with: one per change, checked.

Each Kafka record is a Debezium-style envelope (``pipeline.capture.envelope``). The apply needs
its table, op, key, binlog position and source time, and the after-image, which
``pipeline.cdc.images`` reads out of the record's own text when it builds the rows: the
record is kept as the text it arrived as (the ``envelope`` column), never cut apart or
encoded again here.

A whole batch is first decoded at once in Arrow's JSON reader (``_decode_batch``: op, source
and key; the batch's lines are the records' bytes joined in Arrow, no Python object a
record). Anything unusual in the batch (a record that is not one JSON object on one line, a
key of another type, a bad field) sends the whole batch down the record by record path
(``_decode_records``, msgspec), which decodes the same changes or says which record is wrong.
Cutting each record's after-image out in Python was a seventh of the apply's time in a 1 M-row
snapshot (profiled).
"""

from __future__ import annotations

import functools
from typing import Any

import msgspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pa_json

from lakehouse.errors import FatalError
from pipeline.capture import envelope as env

CHANGE_SCHEMA = pa.schema([("topic", pa.string()), ("partition", pa.int32()), ("offset", pa.int64()),
                           ("tbl", pa.string()), ("op", pa.string()), ("pk", pa.string()),
                           ("order_key", pa.string()), ("source_ts_ms", pa.int64()), ("envelope", pa.string())])

_decode = msgspec.json.Decoder().decode


class EnvelopeError(FatalError, ValueError):
    """A change record the apply job cannot interpret; it stops rather than guess (retrying reads it again)."""


class _Source(msgspec.Struct):
    table: str
    ts_ms: int
    file: str
    pos: int
    row: int


_NULL = b"null"


class _Envelope(msgspec.Struct):
    op: str
    source: _Source
    before: msgspec.Raw = msgspec.Raw(_NULL)  # the image's JSON text, not built (a missing one reads null)
    after: msgspec.Raw = msgspec.Raw(_NULL)


_envelope = msgspec.json.Decoder(_Envelope).decode


@functools.lru_cache(maxsize=64)
def _key_of(key: str):
    """A decoder of an image that builds only its ``key`` field (the others are skipped, not built)."""
    return msgspec.json.Decoder(msgspec.defstruct("Key", [("value", Any, None)], rename={"value": key})).decode


def parse_changes(raw: pa.RecordBatch, keys: dict[str, str],
                  images: dict[str, pa.StructType | None] | None = None) -> pa.RecordBatch:
    """Raw Kafka records -> one row per change; raises EnvelopeError on anything unknown.

    ``images``: per topic, the after-image's fields as its table reads them
    (``pipeline.cdc.images.image_struct``). A batch of one such topic is then read once: its
    after-images come out as an ``image`` column beside ``CHANGE_SCHEMA``'s, and the writer does not
    parse the records' text a second time (that second parse was ~8 % of the apply's CPU).
    """
    return _decode_batch(raw, keys, images or {}) or _decode_records(raw, keys)


def _decode_records(raw: pa.RecordBatch, keys: dict[str, str]) -> pa.RecordBatch:
    """``parse_changes`` one record at a time: slower, and it names the record that is wrong."""
    topics = raw.column("topic").to_pylist()
    changes = []
    for i, value in enumerate(raw.column("value").to_pylist()):
        try:
            if value is None:
                raise EnvelopeError("tombstone (null value) not expected from the lakehouse capture")
            changes.append(_fast(value, keys[topics[i]]) or _change(value, keys[topics[i]]))
        except EnvelopeError as exc:  # where it is, worked out only for the record that failed
            raise EnvelopeError(f"{topics[i]}[{raw.column('partition')[i]}]@{raw.column('offset')[i]}: {exc}") from None
    columns = list(zip(*changes, strict=True)) if changes else [()] * 6
    arrays = [raw.column("topic"), raw.column("partition"), raw.column("offset")]
    arrays += [pa.array(list(values), type=CHANGE_SCHEMA.field(n).type)
               for n, values in zip(CHANGE_SCHEMA.names[3:], columns, strict=True)]
    return pa.RecordBatch.from_arrays(arrays, schema=CHANGE_SCHEMA)


def _fast(value: bytes, key: str) -> tuple | None:
    """The change of a well-formed envelope, or None for anything else (``_change`` then says what is wrong)."""
    try:
        record = _envelope(value)
        if record.op not in env.OPS or not 0 <= record.source.ts_ms < 2**63:
            return None
        image = record.before if record.op == "d" else record.after
        if bytes(image) == _NULL:
            return None
        pk = _key_of(key)(image).value
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    if pk is None or isinstance(pk, (dict, list, bool)):
        return None
    source = record.source
    return (source.table, record.op, str(pk), f"{source.file}:{source.pos:015d}:{source.row:06d}", source.ts_ms,
            value.decode())


def _change(value: bytes, key: str) -> tuple:
    """(table, op, pk, order key, source ts, the record's text) of one envelope, or EnvelopeError saying what is wrong."""
    try:
        record = _decode(value)  # msgspec: a 10 M-row snapshot decodes ~3x faster than with json
    except msgspec.DecodeError as exc:
        raise EnvelopeError(f"not JSON ({str(exc)[:120]})") from None
    if not isinstance(record, dict):
        raise EnvelopeError(f"not a Debezium envelope (a JSON {type(record).__name__})")
    op, source = record.get("op"), record.get("source")
    if not isinstance(op, str) or op not in env.OPS:
        raise EnvelopeError(f"unknown op {op!r} (expected c, u, d, r)")
    image = record.get("before") if op == "d" else record.get("after")
    if not isinstance(image, dict):
        raise EnvelopeError(f"op {op!r} without its {'before' if op == 'd' else 'after'} image")
    if key not in image or image[key] is None:
        raise EnvelopeError(f"the {'before' if op == 'd' else 'after'} image has no key column {key!r}")
    ts = source.get("ts_ms") if isinstance(source, dict) else None
    if not isinstance(source, dict) or not isinstance(ts, int) or isinstance(ts, bool) or not 0 <= ts < 2**63:
        raise EnvelopeError("source block missing or without an integer ts_ms")
    if not isinstance(source.get("table"), str):
        raise EnvelopeError("source block without its table name")
    try:
        order = env.order_key(source)
    except (KeyError, TypeError, ValueError) as exc:
        raise EnvelopeError(f"source block without its binlog position ({exc!r})") from None
    return (source.get("table"), op, str(image[key]), order, source["ts_ms"], value.decode())




_SOURCE = pa.struct([("table", pa.string()), ("ts_ms", pa.int64()), ("file", pa.string()), ("pos", pa.int64()),
                     ("row", pa.int64())])


def _decode_batch(raw: pa.RecordBatch, keys: dict[str, str],
                  images: dict[str, pa.StructType | None] | None = None) -> pa.RecordBatch | None:
    """The batch's changes decoded in Arrow's JSON reader, or None if any record is not plainly well formed."""
    topics = raw.column("topic")
    values = raw.column("value")
    names = pc.unique(topics).to_pylist()
    if raw.num_rows == 0 or values.null_count or not all(topic in keys for topic in names):
        return None
    lines = record_lines(values)
    if lines is None:
        return None
    try:
        text = values.cast(pa.string())  # the records are UTF-8 (the reader does not check every byte)
    except pa.ArrowInvalid:
        return None
    image = (images or {}).get(names[0]) if len(names) == 1 else None
    decoded = _read_json(lines, sorted({keys[topic] for topic in names}), image)
    if decoded is None or decoded.num_rows != raw.num_rows:
        return None  # a record held more than one object: it read as more rows than records
    op, source = decoded.column("op").combine_chunks(), decoded.column("source").combine_chunks()
    fields = {name: source.field(name) for name in _SOURCE.names}
    deletes = pc.equal(op, "d")
    pk = _keys(decoded, deletes, topics, keys)
    checks = [pc.is_in(op, value_set=pa.array(sorted(env.OPS))), pc.invert(pc.is_null(source))]
    checks += [pc.is_valid(column) for column in (pk, *fields.values())]
    checks += [pc.greater_equal(fields[name], 0) for name in ("ts_ms", "pos", "row")]
    if not all(pc.all(check).as_py() for check in checks):
        return None
    order = pc.binary_join_element_wise(fields["file"], *(pc.utf8_lpad(fields[n].cast(pa.string()), width, "0")
                                                          for n, width in (("pos", 15), ("row", 6))), ":")
    arrays = [topics, raw.column("partition"), raw.column("offset"), fields["table"], op, pk, order, fields["ts_ms"],
              text]
    after = decoded.schema.field("after")
    if image is not None and after.type == image:  # the after-images were read with the rest
        return pa.RecordBatch.from_arrays([*arrays, decoded.column("after").combine_chunks()],
                                          schema=CHANGE_SCHEMA.append(pa.field("image", image)))
    return pa.RecordBatch.from_arrays(arrays, schema=CHANGE_SCHEMA)


def record_lines(values: pa.Array) -> pa.Buffer | None:
    """The values, each ended by a line break, as one buffer for Arrow's JSON reader; None unless every
    value opens a JSON object.

    Arrow's reader is never given a first line that is not an object (a first line ``null``
    crashed pyarrow 26's reader). A value holding anything more than one object (another
    value after it, a line break between two) reads as more than one row, or fails to parse:
    the caller compares the rows read with the values given. Built in Arrow, no Python object
    a value (joining the values in Python and checking each was a seventh of the apply's time).
    """
    values = values.cast(pa.binary())
    if not len(values) or not pc.all(pc.starts_with(values, "{")).as_py():
        return None
    joined = pc.binary_join_element_wise(values, pa.scalar(b"", pa.binary()), pa.scalar(b"\n", pa.binary()))
    offsets = np.frombuffer(joined.buffers()[1], dtype=np.int32)
    return joined.buffers()[2][int(offsets[joined.offset]):int(offsets[joined.offset + len(joined)])]


def _read_json(lines: bytes, key_names: list[str], image: pa.StructType | None = None) -> pa.Table | None:
    """op, source and the images' key fields of each line; a key read as text, else as an integer.

    With ``image`` the whole after-image is read in the same pass, as that struct; a line it does not fit
    (a value of another JSON type) reads again without it.
    """
    shapes = [(pa.struct([(name, kind) for name in key_names]),) * 2 for kind in (pa.string(), pa.int64())]
    if image is not None and all(image.get_field_index(name) >= 0 for name in key_names):
        shapes.insert(0, (pa.struct([image.field(name) for name in key_names]), image))
    for before, after in shapes:
        schema = pa.schema([("op", pa.string()), ("before", before), ("after", after), ("source", _SOURCE)])
        try:
            return pa_json.read_json(pa.py_buffer(lines), parse_options=pa_json.ParseOptions(
                explicit_schema=schema, unexpected_field_behavior="ignore"))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            continue
    return None


def _keys(decoded: pa.Table, deletes: pa.Array, topics: pa.Array, keys: dict[str, str]) -> pa.Array:
    """Each change's key as text: from the before-image of a delete, else the after-image; by its topic's key."""
    before, after = decoded.column("before").combine_chunks(), decoded.column("after").combine_chunks()
    in_batch = pc.unique(topics)
    key_name = pc.take(pa.array([keys[topic] for topic in in_batch.to_pylist()]), pc.index_in(topics, in_batch))
    names = pc.unique(key_name).to_pylist()
    pk = pc.if_else(deletes, pc.struct_field(before, names[0]), pc.struct_field(after, names[0]))
    for name in names[1:]:
        value = pc.if_else(deletes, pc.struct_field(before, name), pc.struct_field(after, name))
        pk = pc.if_else(pc.equal(key_name, name), value, pk)
    return pk.cast(pa.string())
