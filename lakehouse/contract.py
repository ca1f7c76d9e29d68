"""The ClickEvent contract: one versioned JSON Schema (``contracts/clickevent.schema.json``).

Apps, the load generator, the pipeline's validation and the docs all read the same file, so
what "a valid event" means is declared once. The pipeline does not run a JSON Schema
validator per event (a microsecond budget per event); it derives its typed decoder and its
checks from the fields below, and a test holds the generator's events to the schema itself.

Fields beyond the contract are allowed by the schema; what becomes of them is the pipeline's
schema policy (``pipeline.schema_policy``: evolve, strict, ignore).
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path

CONTRACT_PATH = Path(__file__).resolve().parent / "contracts" / "clickevent.schema.json"

#: contract fields stored under another column name in the click table
COLUMN_NAMES = {"eventId": "event_id"}


@dataclass(frozen=True)
class ContractField:
    """One declared field: ``integer`` fields are numbers in a range, ``text`` fields ids (string or integer)."""

    name: str
    kind: str  # "integer" | "text"
    required: bool
    minimum: int | None = None
    maximum: int | None = None
    max_length: int | None = None
    description: str = ""

    @property
    def column(self) -> str:
        return COLUMN_NAMES.get(self.name, self.name)


@dataclass(frozen=True)
class Contract:
    title: str
    version: int
    fields: tuple[ContractField, ...]
    schema: dict

    @property
    def names(self) -> frozenset[str]:
        return frozenset(f.name for f in self.fields)

    def field(self, name: str) -> ContractField:
        return next(f for f in self.fields if f.name == name)


def _field(name: str, spec: dict, required: bool) -> ContractField:
    types = spec["type"] if isinstance(spec["type"], list) else [spec["type"]]
    if types == ["integer"]:
        kind = "integer"
    elif sorted(types) == ["integer", "string"]:
        kind = "text"
    else:
        raise ValueError(f"{CONTRACT_PATH}: field {name!r} has type {types}; the pipeline reads integer fields "
                         "and id fields (string or integer)")
    return ContractField(name, kind, required, spec.get("minimum"), spec.get("maximum"), spec.get("maxLength"),
                         spec.get("description", ""))


@functools.cache
def click_contract(path: Path = CONTRACT_PATH) -> Contract:
    """The contract as the pipeline uses it (parsed once per process)."""
    schema = json.loads(path.read_text())
    required = set(schema.get("required", []))
    fields = tuple(_field(name, spec, name in required) for name, spec in schema["properties"].items())
    return Contract(schema["title"], int(schema["version"]), fields, schema)
