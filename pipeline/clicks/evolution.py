"""Schema evolution of the click table: which new fields become columns, and of which type.

The contract (``lakehouse/contracts/clickevent.schema.json``) fixes the fields every event
has. Apps add fields as they release; with ``pipeline.schema_policy = evolve`` a new top-level
scalar field becomes a nullable column named exactly as in the event, in the same commit as
the batch that first carried it (``pipeline.clicks.evolving_batch``). These are the rules,
kept free of Spark and Iceberg so the parser on an executor and the driver apply the same:

- a value's *kind* is the narrowest column type that holds it exactly: ``boolean``,
  ``int`` (32-bit), ``long``, ``float`` (when float32 holds it exactly), ``double``, ``string``;
- a column accepts the kinds it holds exactly; ``int`` -> ``long`` and ``float`` -> ``double``
  are widenings (Iceberg promotes them in place); anything else is a ``wrong_type`` dead letter,
  as is a nested object or array in a field that is not in the contract;
- a name must be a plain identifier that no column has, whatever its case (Spark and Trino
  resolve names case-insensitively), else ``bad_field_name``;
- renames are never guessed: a field that stops arriving reads null, a new one is new.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass, replace
from typing import Any, Literal

import pyarrow as pa

Policy = Literal["evolve", "strict", "ignore"]

#: the column types an evolved field can have, as Arrow, Spark SQL and Iceberg name them
ARROW_TYPES = {"boolean": pa.bool_(), "int": pa.int32(), "long": pa.int64(), "float": pa.float32(),
               "double": pa.float64(), "string": pa.string()}
SPARK_TYPES = {"boolean": "boolean", "int": "int", "long": "bigint", "float": "float", "double": "double",
               "string": "string"}
#: the widenings Iceberg allows in place
WIDENINGS = {("int", "long"), ("float", "double")}
WIDER = {"int": "long", "float": "double"}
#: kinds a column of each type stores as they are
ACCEPTS = {"boolean": {"boolean"}, "int": {"int"}, "long": {"int", "long"}, "float": {"float", "int", "long"},
           "double": {"float", "double", "int", "long"}, "string": {"string"}}

NAME_PATTERN = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,62}")

#: marks the executor's request for an evolving batch in the text of a failed Spark job
CHANGE_MARKER = "lakehouse-schema-change-needed"

INT32 = (-(2**31), 2**31 - 1)
INT64 = (-(2**63), 2**63 - 1)


class SchemaChangeNeeded(Exception):
    """Raised by a Spark task that met a field the table has no (wide enough) column for.

    It fails the Spark job before anything is committed; the driver then runs the batch as an
    evolving batch. Only the marker in its text crosses the JVM.
    """

    def __init__(self, name: str, kind: str):
        super().__init__(f"{CHANGE_MARKER}: field {name!r} of kind {kind}")


def is_change_request(exc: BaseException) -> bool:
    return CHANGE_MARKER in str(exc)


def value_kind(value: Any) -> str | None:
    """The narrowest column type holding ``value`` exactly; None for objects, arrays and null."""
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        if INT32[0] <= value <= INT32[1]:
            return "int"
        return "long" if INT64[0] <= value <= INT64[1] else None
    if isinstance(value, float):
        try:
            return "float" if struct.unpack("f", struct.pack("f", value))[0] == value else "double"
        except OverflowError:
            return "double"
    if isinstance(value, str):
        return "string"
    return None


def fit(column_type: str, kind: str) -> Literal["ok", "widen", "wrong"]:
    """How a value of ``kind`` goes into a column of ``column_type``."""
    if kind in ACCEPTS[column_type]:
        return "ok"
    if (column_type, kind) in WIDENINGS:
        return "widen"
    return "wrong"


@dataclass(frozen=True)
class Change:
    """One evolution of the click table: a column added, or a column's type widened."""

    field: str
    action: Literal["added", "widened"]
    type: str
    previous: str | None = None

    def describe(self) -> str:
        if self.action == "added":
            return f"added {self.field} {self.type}"
        return f"widened {self.field} {self.previous} -> {self.type}"

    def as_dict(self) -> dict:
        return {"field": self.field, "change": self.action, "type": self.type, "from": self.previous}


@dataclass(frozen=True)
class Shape:
    """What the parser needs beyond the contract: the table's evolved columns and the policy.

    ``columns`` are (name, type) in table order; ``reserved`` the lower-cased names no event
    field may take (the contract's fields and the pipeline's own columns).
    """

    columns: tuple[tuple[str, str], ...] = ()
    policy: Policy = "evolve"
    max_columns: int = 64
    reserved: frozenset[str] = frozenset()

    def column_type(self, name: str) -> str | None:
        return next((t for n, t in self.columns if n == name), None)

    def name_problem(self, name: str) -> str | None:
        """Why ``name`` cannot become a column, or None."""
        if not NAME_PATTERN.fullmatch(name):
            return (f"{name[:80]!r} cannot be a column name: a letter, then letters, digits or '_', "
                    "at most 63 characters")
        lower = name.lower()
        if lower in self.reserved:
            return f"{name!r} is one of the click table's own columns (names are case-insensitive)"
        clash = next((n for n, _ in self.columns if n.lower() == lower and n != name), None)
        if clash:
            return f"{name!r} differs only in case from the column {clash!r} (names are case-insensitive)"
        return None

    def evolved(self, changes: list[Change]) -> Shape:
        columns = dict(self.columns)
        for change in changes:
            columns[change.field] = change.type
        return replace(self, columns=tuple(columns.items()))


def decide(shape: Shape, proposals: list[tuple[str, str]]) -> list[Change]:
    """The changes a batch's proposals (field, kind) ask for, folded in batch order.

    The first value of a new field gives its column's type; later values widen it where
    Iceberg can, and the rest are dead letters of the batch. Deterministic for one batch,
    so the evolving batch and any re-read of it classify every record the same way.
    """
    before = dict(shape.columns)
    types = dict(before)
    for name, kind in proposals:
        current = types.get(name)
        if current is None:
            types[name] = kind
        elif fit(current, kind) == "widen":
            types[name] = WIDER[current]
    changes = []
    for name, type_ in types.items():
        if name not in before:
            changes.append(Change(name, "added", type_))
        elif type_ != before[name]:
            changes.append(Change(name, "widened", type_, before[name]))
    return changes


def shape_of(schema_fields: list[tuple[str, str]], fixed: frozenset[str], policy: Policy, max_columns: int,
             reserved: frozenset[str]) -> Shape:
    """The evolved columns of a table schema given as (name, Spark simple type) pairs."""
    by_spark = {v: k for k, v in SPARK_TYPES.items()}
    columns = tuple((name, by_spark[kind]) for name, kind in schema_fields if name not in fixed and kind in by_spark)
    return Shape(columns, policy, max_columns, reserved)
