"""Helpers shared by the CLI's command groups: settings loading, error reporting, figures and run reports."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import typer
from pydantic import ValidationError
from rich.console import Console
from rich.table import Table

from lakehouse.errors import LakehouseError
from lakehouse.settings import Settings, load_settings

# Progress, verdicts and diagnostics go to stderr; what a command answers (a table of data, a
# contract, a status) goes to stdout, so it can be piped or redirected on its own.
console = Console(stderr=True, log_path=False, soft_wrap=True)
answer = Console(soft_wrap=True)


def settings_or_exit() -> Settings:
    """Resolve settings; invalid values end the command with one line per bad setting."""
    try:
        return load_settings()
    except ValidationError as exc:
        for err in exc.errors():
            where = ".".join(str(p) for p in err["loc"])
            env = "LAKEHOUSE_" + "__".join(str(p).upper() for p in err["loc"])
            msg = err["msg"].removeprefix("Value error, ")
            console.print(f"[red]error:[/] setting {where} ({env}): {msg} (got {err.get('input')!r})", markup=True)
        raise typer.Exit(2) from None


def stack_settings_or_exit(*needed: str) -> Settings:
    """Settings, once the local stack's ``needed`` services answer; else one line saying how to start them.

    The benchmarks run on the local stack: without this check a stopped metastore shows up
    as a page of JVM connection retries and a thrift traceback, long after the command began.
    """
    from deploy.local.stack import LocalStack

    def answers(svc) -> bool:
        try:
            return svc.ready()
        except Exception:  # noqa: BLE001 - e.g. no credentials yet: the stack never started here
            return False

    settings = settings_or_exit()
    down = [f"{svc.name} ({svc.main_port})" for svc in LocalStack(settings).services()
            if svc.name in needed and not answers(svc)]
    if down:
        console.print(f"[red]error:[/] the local stack is not up: {', '.join(down)} not answering. Start it with "
                      "`lakehouse stack up` (the Makefile targets do so), then run this again.")
        raise typer.Exit(1)
    return settings


@contextmanager
def friendly_errors() -> Iterator[None]:
    """Show a problem the project explains (``LakehouseError``; a missing file) as one line, exit 1.

    Any other exception is a bug and keeps its traceback. ``main`` does the same for every command;
    a command uses this where it must print before it exits (a progress display to close first).
    """
    try:
        yield
    except (LakehouseError, FileNotFoundError) as exc:
        console.print(f"[red]error:[/] {exc}")
        raise typer.Exit(1) from None


def print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, sort_keys=True, default=str) + "\n")


def print_figures(title: str, figures: list[tuple[str, str]]) -> None:
    table = Table(title=title)
    table.add_column("figure")
    table.add_column("value", justify="right")
    for name, value in figures:
        table.add_row(name, value)
    console.print(table)
