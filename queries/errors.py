"""What a question can go wrong with, said so that the user can act (no SQL library needed to raise it)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from lakehouse.errors import LakehouseError

if TYPE_CHECKING:
    import pyarrow as pa


class EngineGap(LakehouseError):
    """A query the chosen engine cannot answer faithfully (names the gap; never a wrong answer)."""


@dataclass
class Outcome:
    """One statement's answer: its rows (None for a statement without any, like USE) and its time."""

    statement: str
    table: pa.Table | None
    message: str
    seconds: float
    schema: str | None = None  # the session's schema after the statement (USE changes it)
