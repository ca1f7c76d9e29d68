"""Query results as a readable table, CSV or JSON lines."""

from __future__ import annotations

import io
import json

import pyarrow as pa
import pyarrow.csv as pacsv
from rich.console import Console
from rich.table import Table

FORMATS = ("table", "csv", "json")


def write(result: pa.Table, fmt: str, console: Console, title: str | None = None, footer: str | None = None) -> None:
    """``result`` on stdout as ``fmt``; for a table, ``footer`` (default: the row count) below it."""
    if fmt == "csv":
        buffer = io.BytesIO()
        pacsv.write_csv(result, buffer)
        print(buffer.getvalue().decode(), end="")
    elif fmt == "json":
        for row in result.to_pylist():
            print(json.dumps(row, default=str))
    else:
        table = Table(title=title, title_justify="left")
        for name in result.column_names:
            numeric = pa.types.is_integer(result.schema.field(name).type) or \
                pa.types.is_floating(result.schema.field(name).type) or pa.types.is_decimal(result.schema.field(name).type)
            table.add_column(name, justify="right" if numeric else "left")
        for row in result.to_pylist():
            table.add_row(*("NULL" if v is None else str(v) for v in row.values()))
        console.print(table)
        console.print(footer or f"{result.num_rows} row(s)", style="dim")
