"""`lakehouse trino`: the real Trino CLI (476) on the local stack's Trino, catalog ``iceberg`` preset.

Trino starts on first use (about 15 s); arguments after the options go to the CLI as they are, so a
Trino user's habits work unchanged: ``lakehouse trino``, then ``use ods_behavior;`` and
``select * from clickevent limit 100;``, or ``lakehouse trino --execute "..."``.
"""

from __future__ import annotations

import subprocess
import sys

import typer

from cli.common import console, friendly_errors, stack_settings_or_exit
from lakehouse.settings import Settings


def ensure_trino(settings: Settings) -> None:
    """Start the local stack's Trino unless it answers already (it is an on-demand service)."""
    from deploy.local.stack import LocalStack

    with friendly_errors(), console.status("Trino: starting on first use (about 15 s)...") as status:
        LocalStack(settings).ensure("trino", progress=lambda msg: (console.log(msg), status.update(msg)))


def ensure_local_trino(settings: Settings) -> None:
    """For ``--engine trino``: when this checkout's local stack runs, make sure its Trino does too; when it
    does not, the engine talks to whatever answers on ``trino.port`` (a cluster's coordinator, forwarded)."""
    from deploy.local import processes

    record = processes.read_record(settings.run_dir, "metastore")
    if record and record.process():
        ensure_trino(settings)  # started, or waited for while it starts


def trino(ctx: typer.Context) -> None:
    """Open the Trino CLI (476) on the local stack, catalog `iceberg`; Trino starts on first use.

    Any other option is passed to the Trino CLI unchanged (its own options: `lakehouse trino -- --help`).
    Examples:

      lakehouse trino                                   (then: use ods_behavior; select * from clickevent limit 100;)

      lakehouse trino --schema ods_behavior --execute "select count(*) from clickevent"

      lakehouse trino --execute 'select * from "clickevent$snapshots"' --schema ods_behavior --output-format=TSV_HEADER
    """
    settings = stack_settings_or_exit("s3", "metastore")
    ensure_trino(settings)
    from deploy.local.services.trino import cli_command

    with friendly_errors():
        command = cli_command(settings, list(ctx.args), interactive=sys.stdin.isatty())
    raise typer.Exit(subprocess.call(command))
