"""A new ClickEvent field rolled out the way an app release reaches its users.

``lakehouse load clicks --new-field deviceType:string --rollout 10%->100%`` makes a share of the
events carry ``deviceType``, rising linearly from 10 % at the start of the run to 100 % at
its end, as clients update. It shows the pipeline's schema evolution under load: the batch
that first carries the field adds the column (docs/schema-evolution.md).
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from typing import Any

from lakehouse.contract import click_contract

#: JSON types a new field can have (the contract's names for them)
FIELD_TYPES = ("string", "integer", "number", "boolean")
_SAMPLES = {"deviceType": ("ios", "android", "web", "tv")}


@dataclass(frozen=True)
class NewField:
    name: str
    type: str

    @classmethod
    def parse(cls, text: str) -> NewField:
        """'deviceType:string' -> NewField; says what is wrong otherwise."""
        name, sep, kind = text.partition(":")
        name, kind = name.strip(), (kind.strip() or "string")
        if not re.fullmatch(r"[A-Za-z][A-Za-z0-9_]{0,62}", name):
            raise ValueError(f"--new-field {text!r}: the name must be a letter then letters, digits or '_' "
                             "(e.g. deviceType:string)")
        if kind not in FIELD_TYPES:
            raise ValueError(f"--new-field {text!r}: the type must be one of {', '.join(FIELD_TYPES)}")
        if name in click_contract().names:
            raise ValueError(f"--new-field {name!r} is already in the {click_contract().title} contract")
        return cls(name, kind)

    def value(self, rng: random.Random) -> Any:
        if self.type == "string":
            return rng.choice(_SAMPLES.get(self.name, (f"{self.name}-a", f"{self.name}-b", f"{self.name}-c")))
        if self.type == "integer":
            return rng.randint(1, 50)
        if self.type == "number":
            return round(rng.uniform(0, 100), 2)
        return rng.random() < 0.5


@dataclass(frozen=True)
class Rollout:
    """The share of events carrying the new fields, from ``start`` to ``end`` over the run."""

    start: float = 1.0
    end: float = 1.0

    @classmethod
    def parse(cls, text: str) -> Rollout:
        """'10%->100%', '10%→100%', '0.1-0.9' or one share ('50%') for the whole run."""
        parts = [p.strip() for p in re.split(r"→|->|:|(?<=%)-|(?<=\d)-(?=\d)", text) if p.strip()]
        try:
            shares = [float(p[:-1]) / 100 if p.endswith("%") else float(p) for p in parts]
        except ValueError:
            shares = []
        if len(shares) not in (1, 2) or not all(0 <= s <= 1 for s in shares):
            raise ValueError(f"--rollout {text!r}: give a share or a start and an end, such as 10%->100% "
                             "(shares between 0 and 100 %)")
        return cls(shares[0], shares[-1])

    def share(self, elapsed: float, duration: float) -> float:
        progress = min(1.0, max(0.0, elapsed / duration)) if duration > 0 else 1.0
        return self.start + (self.end - self.start) * progress


def with_new_fields(event: dict, fields: tuple[NewField, ...], share: float, rng: random.Random) -> dict:
    """The event, carrying the new fields if this client has updated (probability ``share``)."""
    if fields and rng.random() < share:
        event.update({f.name: f.value(rng) for f in fields})
    return event
