"""`lakehouse stack ...`: bring the local stack up and down, and look at it."""

from __future__ import annotations

import time
from typing import Annotated

import typer
from rich.table import Table

from cli.common import answer, console, friendly_errors, print_json, settings_or_exit

app = typer.Typer(help="Run the local stack: every service a real process on 127.0.0.1, no Docker.", no_args_is_help=True)


def _stack():
    from deploy.local.stack import LocalStack

    return LocalStack(settings_or_exit())


@app.command()
def up() -> None:
    """Start S3, Kafka, PostgreSQL, the metastore, MariaDB, Prometheus and the SQL service (idempotent).

    Trino starts on first use (`lakehouse trino`) unless LAKEHOUSE_TRINO__START=always.
    Ports are checked first; if anything fails, whatever this call started is stopped.
    """
    stack = _stack()
    began = time.monotonic()
    with friendly_errors(), console.status("starting the local stack...") as status:
        stack.up(progress=lambda msg: (console.log(msg), status.update(msg)))
    console.print(f"[green]local stack ready[/] in {time.monotonic() - began:.1f}s; run dir {stack.settings.run_dir}")
    _print_status(stack.status())


@app.command()
def down(purge: Annotated[bool, typer.Option(help="Also delete the run directory (all data).")] = False) -> None:
    """Stop exactly the processes `up` started. Data stays unless --purge."""
    with friendly_errors():
        stopped = _stack().down(purge=purge, progress=console.log)
    console.print(f"stopped {len(stopped)} service(s)" + (" and purged the data" if purge else ""))


@app.command()
def status(as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output (stable keys).")] = False) -> None:
    """Show each service: pid, port, whether it answers its protocol, memory."""
    with friendly_errors():
        rows = _stack().status()
    if as_json:
        print_json({"services": [r.as_dict() for r in rows],
                    "all_ready": all(r.ready for r in rows if r.pid or not r.on_demand)})
        return
    _print_status(rows)


def _print_status(rows) -> None:
    table = Table(title="local stack")
    for col in ("service", "pid", "port", "ready", "memory (MiB)"):
        table.add_column(col)
    for r in rows:
        state = ("[green]yes[/]" if r.ready else "[red]no[/]") if r.pid or not r.on_demand else "on first use"
        table.add_row(r.service, str(r.pid or "-"), str(r.port), state,
                      f"{r.memory_mb:.0f}" if r.memory_mb is not None else "-")
    total = sum(r.memory_mb or 0 for r in rows)
    table.caption = f"total memory {total:.0f} MiB"
    answer.print(table)


@app.command()
def logs(
    service: Annotated[str | None, typer.Argument(help="One service (default: all).")] = None,
    lines: Annotated[int, typer.Option("-n", "--lines", help="Lines per service.")] = 30,
) -> None:
    """Print the last lines of each service's log file."""
    stack = _stack()
    with friendly_errors():
        services = [stack.service(service)] if service else stack.services()
    for svc in services:
        typer.echo(f"==> {svc.log_path} <==")
        if svc.log_path.exists():
            typer.echo("\n".join(svc.log_path.read_text(errors="replace").splitlines()[-lines:]))
