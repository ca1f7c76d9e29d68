"""Validate and clean raw ClickEvents: every input is classified, nothing raises.

An event is valid when it is a JSON object of bounded size with the seed's fields in
the right types and ranges and an event time within the accepted window around the time it
was produced (its Kafka timestamp). Cleaning is
deliberately small and predictable: ids may arrive as strings or integers and are
stored as trimmed strings. Anything else becomes a dead-letter record with a reason
(``kind: detail``) and the raw bytes, so no event is ever dropped silently.

Most events are valid, so they take a fast path: msgspec decodes and type-checks one in C
(about a microsecond), and only the range and text checks run in Python. An event it
rejects goes through the plain-Python parser, which names exactly what is wrong: the two
paths accept the same events (tests/pipeline/clicks/test_bad_input_properties.py). The Python
parser alone cost 12-18 µs an event, the largest share of a click batch's Python time.
"""

from __future__ import annotations

import functools
import json
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, cast

import msgspec
import pyarrow as pa

from lakehouse.contract import ContractField, click_contract
from pipeline.clicks.evolution import ARROW_TYPES, INT32, SchemaChangeNeeded, Shape, fit, value_kind
from pipeline.kafka_source.range_reader import RAW_SCHEMA
from pipeline.tables import CLICKS_FIXED_COLUMNS

if TYPE_CHECKING:
    from lakehouse.settings import Settings

CONTRACT = click_contract()
#: names no event field may take as a column, in any case: the contract's and the pipeline's own
RESERVED_NAMES = frozenset(n.lower() for n in CLICKS_FIXED_COLUMNS | CONTRACT.names)
TEXT_FIELDS = [f for f in CONTRACT.fields if f.kind == "text"]
#: the contract's bounds, named for the checks below (the contract file is the source)
MAX_ID_LENGTH = max(f.max_length or 64 for f in TEXT_FIELDS)
MAX_WEBPAGE_ID = CONTRACT.field("webpageId").maximum
MAX_EXPEND_TIME = CONTRACT.field("expendTime").maximum
EVENT_TIME = "updateTime"  # its window is relative to the Kafka timestamp (Limits), not fixed
#: (field, column, is text, required) of each contract field, resolved once: the fast path runs per event
_FAST_FIELDS = tuple((f.name, f.column, f.kind == "text", f.required) for f in CONTRACT.fields)


def _arrow_type(f: ContractField) -> pa.DataType:
    if f.kind == "text":
        return pa.string()
    small = f.maximum is not None and f.minimum is not None and INT32[0] <= f.minimum and f.maximum <= INT32[1]
    return pa.int32() if small else pa.int64()


PARSED_SCHEMA = pa.schema([
    *RAW_SCHEMA,
    ("error", pa.string()),  # null for valid events: "kind: detail" otherwise
    *[(f.column, _arrow_type(f)) for f in CONTRACT.fields],
])

FIELDS = [f.name for f in PARSED_SCHEMA][len(RAW_SCHEMA) + 1:]
#: the policy of callers that pass no shape: fields beyond the contract are dropped
IGNORE = Shape(policy="ignore")


def parsed_schema(shape: Shape) -> pa.Schema:
    """PARSED_SCHEMA and the table's evolved columns after it."""
    return pa.schema([*PARSED_SCHEMA, *[(name, ARROW_TYPES[kind]) for name, kind in shape.columns]])


@dataclass(frozen=True)
class Limits:
    max_bytes: int = 16_384
    max_age_ms: int = 7 * 86_400_000
    max_future_ms: int = 300_000

    @classmethod
    def of(cls, settings: Settings) -> Limits:
        """The limits the pipeline's settings declare (``pipeline.max_event_*``)."""
        pipe = settings.pipeline
        return cls(max_bytes=pipe.max_event_bytes, max_age_ms=pipe.max_event_age_days * 86_400_000,
                   max_future_ms=pipe.max_event_future_seconds * 1000)


class Invalid(ValueError):
    def __init__(self, kind: str, detail: str):
        super().__init__(f"{kind}: {detail}")


def _int(obj: dict, name: str, low: int, high: int) -> int:
    value = obj.get(name)
    if value is None:
        raise Invalid("missing_field", name)
    if isinstance(value, bool) or not isinstance(value, int):
        raise Invalid("wrong_type", f"{name} must be an integer, got {type(value).__name__}")
    if not low <= value <= high:
        raise Invalid("out_of_range", f"{name}={value} outside [{low}, {high}]")
    return value


def _id(obj: dict, name: str, required: bool = True) -> str | None:
    return _text(name, obj.get(name), required)


def _text(name: str, value: Any, required: bool = True) -> str | None:
    if value is None:
        if required:
            raise Invalid("missing_field", name)
        return None
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise Invalid("wrong_type", f"{name} must be a string, got {type(value).__name__}")
    text = str(value).strip()
    if not text:
        raise Invalid("out_of_range", f"{name} is empty")
    if len(text) > MAX_ID_LENGTH:
        raise Invalid("out_of_range", f"{name} longer than {MAX_ID_LENGTH}")
    return text


def _decoded_type(f: ContractField) -> Any:
    if f.kind == "text":
        return str | int
    if f.minimum is None and f.maximum is None:
        return int
    return Annotated[int, msgspec.Meta(ge=f.minimum, le=f.maximum)]


#: how the fast path decodes an evolved column's value (the Python path names what does not fit)
_EVOLVED_DECODED: dict[str, Any] = {
    "boolean": bool, "int": Annotated[int, msgspec.Meta(ge=INT32[0], le=INT32[1])], "long": int,
    "float": float, "double": float, "string": str,
}


@functools.lru_cache(maxsize=16)
def _decoder(columns: tuple[tuple[str, str], ...], forbid_unknown: bool) -> msgspec.json.Decoder:
    """A valid event's shape (types and fixed ranges) for msgspec; the time window and the ids' text are checked after.

    With ``forbid_unknown`` (policies evolve and strict) a field beyond the contract and the
    table's columns sends the event to the Python path, which decides what it means.
    """
    fields: list[tuple] = [(f.name, _decoded_type(f)) if f.required else (f.name, _decoded_type(f) | None, None)
                           for f in CONTRACT.fields]
    fields += [(name, _EVOLVED_DECODED[kind] | None, None) for name, kind in columns]
    struct = msgspec.defstruct("ClickEvent", fields, kw_only=True, forbid_unknown_fields=forbid_unknown)
    return msgspec.json.Decoder(struct)


def decoder(shape: Shape) -> msgspec.json.Decoder:
    return _decoder(shape.columns, shape.policy != "ignore")


def parse_event(raw: bytes | None, now_ms: int, limits: Limits, shape: Shape = IGNORE,
                proposals: list[tuple[str, str]] | None = None) -> dict[str, Any]:
    """One raw payload -> the cleaned fields. Raises Invalid with a reason.

    A field the table has no (wide enough) column for, under policy evolve, is a proposal:
    appended to ``proposals`` if given, else raised as SchemaChangeNeeded.
    """
    if raw is None:
        raise Invalid("malformed_json", "empty message (null value)")
    if len(raw) > limits.max_bytes:
        raise Invalid("oversize", f"{len(raw)} bytes > {limits.max_bytes}")
    try:
        event = decoder(shape).decode(raw)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return _parse_in_python(raw, now_ms, limits, shape, proposals)  # it says what is wrong
    low, high = now_ms - limits.max_age_ms, now_ms + limits.max_future_ms
    update_time = getattr(event, EVENT_TIME)
    if not low <= update_time <= high:
        raise Invalid("out_of_range", f"{EVENT_TIME}={update_time} outside [{low}, {high}]")
    fields = {}
    for name, column, text, required in _FAST_FIELDS:
        value = getattr(event, name)
        if text and not (type(value) is str and 0 < len(value) <= MAX_ID_LENGTH  # the usual id: kept as it is
                         and not value[0].isspace() and not value[-1].isspace()):
            value = _text(name, value, required)
        fields[column] = value
    for name, kind in shape.columns:
        value = getattr(event, name)
        if kind == "float" and value is not None and value_kind(float(value)) == "double":
            return _parse_in_python(raw, now_ms, limits, shape, proposals)  # float32 cannot hold it: a widening
        fields[name] = value
    return fields


def _parse_in_python(raw: bytes, now_ms: int, limits: Limits, shape: Shape = IGNORE,
                     proposals: list[tuple[str, str]] | None = None) -> dict[str, Any]:
    try:
        obj = json.loads(raw)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise Invalid("malformed_json", str(exc)[:200]) from None
    if not isinstance(obj, dict):
        raise Invalid("malformed_json", f"expected a JSON object, got {type(obj).__name__}")
    fields: dict[str, Any] = {}
    for f in sorted(CONTRACT.fields, key=lambda f: f.name != EVENT_TIME):  # the time window first, as the fast path
        if f.name == EVENT_TIME:
            fields[f.column] = _int(obj, f.name, now_ms - limits.max_age_ms, now_ms + limits.max_future_ms)
        elif f.kind == "integer":
            fields[f.column] = _int(obj, f.name, f.minimum if f.minimum is not None else -(2**63),
                                    f.maximum if f.maximum is not None else 2**63 - 1)
        else:
            fields[f.column] = _id(obj, f.name, f.required)
    found: list[tuple[str, str]] = []
    for name, value in obj.items():
        if name not in CONTRACT.names:
            _extra_field(name, value, shape, fields, found)
    for name, _ in shape.columns:
        fields.setdefault(name, None)
    if found:
        if proposals is None:
            raise SchemaChangeNeeded(*found[0])
        proposals.extend(found)
    return fields


def _extra_field(name: str, value: Any, shape: Shape, fields: dict[str, Any], found: list[tuple[str, str]]) -> None:
    """A field beyond the contract: a value for its column, a proposal, a dead letter, or nothing (ignore)."""
    column = shape.column_type(name)
    if column is None and shape.policy == "ignore":
        return
    if column is None and shape.policy == "strict":
        raise Invalid("unknown_field", f"{name[:80]!r} is not in the {CONTRACT.title} contract (policy strict)")
    if value is None:
        return  # a null says nothing about a type: the field reads null either way
    kind = value_kind(value)
    if kind is None:
        raise Invalid("wrong_type", f"{name[:80]} must be a string, integer, number or boolean, "
                                    f"got {type(value).__name__}")
    if column is None:
        problem = shape.name_problem(name)
        if problem:
            raise Invalid("bad_field_name", problem)
        if len(shape.columns) >= shape.max_columns:
            raise Invalid("too_many_fields", f"{name[:80]}: the click table has {len(shape.columns)} evolved "
                                             f"columns, pipeline.max_evolved_columns")
        found.append((name, kind))
        return
    verdict = fit(column, kind)
    if verdict == "ok":
        fields[name] = value
    elif verdict == "widen" and shape.policy == "evolve":
        found.append((name, kind))
    else:
        raise Invalid("wrong_type", f"{name} is a {column} column, got {kind} {str(value)[:40]!r}")


def classify(raw: bytes | None, now_ms: int, limits: Limits, shape: Shape = IGNORE,
             proposals: list[tuple[str, str]] | None = None) -> tuple[dict[str, Any] | None, str | None]:
    """(fields, None) for a valid event, (None, reason) otherwise. Raises only SchemaChangeNeeded."""
    try:
        return parse_event(raw, now_ms, limits, shape, proposals), None
    except Invalid as exc:
        return None, str(exc)
    except SchemaChangeNeeded:
        raise
    except Exception as exc:  # noqa: BLE001 - a parser bug must dead-letter, not kill the job
        return None, f"internal: {type(exc).__name__}: {str(exc)[:200]}"


def parse_batch(raw: pa.RecordBatch, limits: Limits, now_ms: int | None = None, shape: Shape = IGNORE,
                proposals: list[tuple[str, str]] | None = None) -> pa.RecordBatch:
    """Raw Kafka records -> ``parsed_schema(shape)``; the error column says which are dead letters.

    The accepted event-time window is measured from each record's Kafka timestamp (when it
    was produced), or from ``now_ms`` if given. So a record is classified the same however
    late it is read: a batch read again after a crash puts every record in the same table
    as the first read did (a window around the wall clock could move a record from one
    table to the other between two reads).
    """
    wall_ms = int(time.time() * 1000)
    schema = parsed_schema(shape)
    names = [f.name for f in schema][len(RAW_SCHEMA) + 1:]
    stamps = raw.column("timestamp_ms").to_pylist() if now_ms is None else None
    out: dict[str, list] = {name: [] for name in ["error", *names]}
    for i, value in enumerate(raw.column("value").to_pylist()):
        reference = cast(int, now_ms) if stamps is None else (
            stamps[i] if stamps[i] is not None and stamps[i] >= 0 else wall_ms)
        fields, error = classify(value, reference, limits, shape, proposals)
        out["error"].append(error)
        for name in names:
            out[name].append(fields[name] if fields else None)
    arrays = list(raw.columns) + [pa.array(out[name], type=schema.field(name).type) for name in out]
    return pa.RecordBatch.from_arrays(arrays, schema=schema)
