"""`lakehouse config ...`: show every resolved setting."""

from __future__ import annotations

from typing import Annotated

import typer

from cli.common import print_json, settings_or_exit
from lakehouse.settings_env import flatten

app = typer.Typer(help="Inspect configuration (settings from defaults, LAKEHOUSE_* env and the run dir).",
                  no_args_is_help=True)


@app.command()
def show(as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output (stable keys).")] = False) -> None:
    """Every resolved setting; credentials appear as '**********' (null when not generated yet)."""
    data = settings_or_exit().masked()
    if as_json:
        print_json(data)
        return
    for key, value in flatten(data).items():
        env = "LAKEHOUSE_" + key.upper().replace(".", "__")
        typer.echo(f"{key:40} {value!s:45} {env}")
