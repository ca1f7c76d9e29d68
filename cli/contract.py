"""`lakehouse contract ...`: the ClickEvent contract, the columns the click table gained, and when."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from cli.common import answer, friendly_errors, settings_or_exit
from lakehouse.contract import CONTRACT_PATH, click_contract

app = typer.Typer(help="The ClickEvent contract (lakehouse/contracts/clickevent.schema.json) and how the click "
                       "table evolved beyond it (pipeline.schema_policy).", no_args_is_help=True)


def contract_rows() -> list[tuple[str, str, str, str, str]]:
    """(field, JSON type, required, range, description) per contract field, in its order."""
    rows = []
    for f in click_contract().fields:
        kind = "integer" if f.kind == "integer" else "string or integer"
        if f.minimum is not None or f.maximum is not None:
            bounds = f"{f.minimum} .. {f.maximum}"
        else:
            bounds = f"length <= {f.max_length}" if f.max_length else ""
        rows.append((f.name, kind, "yes" if f.required else "no", bounds, f.description))
    return rows


def markdown_table() -> str:
    lines = ["| field | type | required | range | meaning |", "|---|---|---|---|---|"]
    lines += ["| " + " | ".join(f"`{row[0]}`" if i == 0 else row[i] for i in range(5)) + " |"
              for row in contract_rows()]
    return "\n".join(lines)


@app.command()
def show(markdown: Annotated[bool, typer.Option("--markdown", help="As the table docs/schema-evolution.md "
                                                                  "holds.")] = False) -> None:
    """The contract's fields: what every ClickEvent carries, and what the pipeline checks."""
    from rich.table import Table

    if markdown:
        typer.echo(markdown_table())
        return
    contract = click_contract()
    table = Table(title=f"{contract.title} contract v{contract.version} ({CONTRACT_PATH.name})")
    for name in ("field", "type", "required", "range", "meaning"):
        table.add_column(name, overflow="fold")
    for row in contract_rows():
        table.add_row(*row)
    answer.print(table)


@app.command()
def history(as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False) -> None:
    """The click table's columns beyond the contract, and every evolution: what changed, when, at which offsets."""
    from rich.table import Table

    from lakehouse.catalog import pyiceberg_catalog
    from pipeline.clicks.evolving_batch import HISTORY_PROPERTY
    from pipeline.tables import CLICKS_FIXED_COLUMNS

    settings = settings_or_exit()
    with friendly_errors():
        table = pyiceberg_catalog(settings).load_table(settings.catalog.clicks_table)
    evolved = {f.name: str(f.field_type) for f in table.schema().fields if f.name not in CLICKS_FIXED_COLUMNS}
    entries = json.loads(table.properties.get(HISTORY_PROPERTY, "[]"))
    if as_json:
        typer.echo(json.dumps({"columns": evolved, "history": entries}, indent=2))
        return
    answer.print(f"{settings.catalog.clicks_table}: {len(evolved)} column(s) beyond the contract"
                  + (": " + ", ".join(f"{k} {v}" for k, v in evolved.items()) if evolved else ""))
    out = Table(title="schema evolution history")
    for name in ("at (UTC)", "change", "offsets [start, end)"):
        out.add_column(name, overflow="fold")
    for entry in entries:
        changes = "; ".join(f"{c['change']} {c['field']} {c['type']}" + (f" (was {c['from']})" if c["from"] else "")
                            for c in entry["changes"])
        offsets = "; ".join(f"{topic}: " + ", ".join(f"p{p} {r[0]}-{r[1]}" for p, r in parts.items())
                            for topic, parts in entry["offsets"].items())
        out.add_row(entry["at"], changes, offsets)
    answer.print(out)
