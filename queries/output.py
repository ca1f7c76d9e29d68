"""Query results as a readable table, CSV or JSON lines.

A result becomes :class:`Rendered` first (csv/json text, or the table's cells as text),
then goes to the terminal. The split lets the local SQL service render a result where it
was computed and send the text, so a one-shot `lakehouse query` needs no Arrow of its own
(a noticeable share of its start-up).
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import msgspec
from rich.console import Console

if TYPE_CHECKING:
    import pyarrow as pa

FORMATS = ("table", "csv", "json")

#: numbers stay numbers: a DECIMAL (DuckDB's sum() of integers is one) is written as its exact digits, not a
#: string; times as ISO 8601; anything else JSON has no type for as its text
_JSON = msgspec.json.Encoder(decimal_format="number", enc_hook=str)


@dataclass
class Rendered:
    """A result ready to print: ``text`` for csv/json; ``columns`` (name, right-aligned) and ``rows`` for a table."""

    text: str | None = None
    columns: list[tuple[str, bool]] = field(default_factory=list)
    rows: list[list[str]] = field(default_factory=list)

    def as_dict(self) -> dict:
        return {"text": self.text, "columns": self.columns, "rows": self.rows}

    @classmethod
    def from_dict(cls, data: dict) -> Rendered:
        return cls(data.get("text"), [(str(n), bool(r)) for n, r in data.get("columns", [])], data.get("rows", []))


def render(result: pa.Table, fmt: str) -> Rendered:
    # deferred: pyarrow only for Arrow answers (the SQL shell's client renders JSON without it)
    import pyarrow as pa
    import pyarrow.csv as pacsv

    if fmt == "csv":
        buffer = io.BytesIO()
        pacsv.write_csv(result, buffer)
        return Rendered(text=buffer.getvalue().decode())
    if fmt == "json":
        return Rendered(text="".join(_JSON.encode(row).decode() + "\n" for row in result.to_pylist()))
    kinds = [result.schema.field(name).type for name in result.column_names]
    columns = [(name, pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t))
               for name, t in zip(result.column_names, kinds)]
    rows = [["NULL" if v is None else str(v) for v in row.values()] for row in result.to_pylist()]
    return Rendered(columns=columns, rows=rows)


def show(rendered: Rendered, console: Console, title: str | None = None, footer: str | None = None) -> None:
    """csv/json text on stdout; a table on the console, with ``footer`` (default: the row count) below it."""
    if rendered.text is not None:
        print(rendered.text, end="")
        return
    # deferred: rich's tables only for the table format
    from rich.table import Table

    table = Table(title=title, title_justify="left")
    for name, right in rendered.columns:
        table.add_column(name, justify="right" if right else "left")
    for row in rendered.rows:
        table.add_row(*row)
    console.print(table)
    console.print(footer or f"{len(rendered.rows)} row(s)", style="dim")


def write(result: pa.Table, fmt: str, console: Console, title: str | None = None, footer: str | None = None) -> None:
    """``result`` as ``fmt``: csv/json on stdout, a table on the console."""
    show(render(result, fmt), console, title, footer)
