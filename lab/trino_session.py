"""The card's Trino session (seed 001), typed into the real Trino CLI 476 as its users type it.

``use ods_behavior; select * from clickevent limit 100;`` through ``trino-cli --catalog iceberg``:
the demo ends with it, so the tables the pipeline wrote are shown by the card's own query engine,
read through the shared metastore, not by anything of the project's.
"""

from __future__ import annotations

import csv
import io
import subprocess
from dataclasses import dataclass

from deploy.local.services.trino import cli_command
from lakehouse.errors import LakehouseError
from lakehouse.settings import Settings


@dataclass
class CliResult:
    statements: str
    header: list[str]
    rows: list[list[str]]


def seed_statements(settings: Settings) -> str:
    """Seed 001's session, for the configured click table (``ods_behavior.clickevent`` by default: verbatim)."""
    namespace, table = settings.catalog.clicks_table.split(".")
    return f"use {namespace};\nselect * from {table} limit 100;\n"


def run_cli(settings: Settings, statements: str, timeout_s: float = 120) -> CliResult:
    """Feed ``statements`` to the Trino CLI's standard input; the last statement's rows, as CSV text cells."""
    try:
        done = subprocess.run(cli_command(settings, ["--output-format=CSV_HEADER"], interactive=False),
                              input=statements, capture_output=True, text=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired:
        raise LakehouseError(f"the Trino CLI did not finish within {timeout_s:.0f}s: is Trino at "
                             f"{settings.trino.address} overloaded? (`lakehouse stack logs trino`)") from None
    if done.returncode != 0:
        raise LakehouseError(f"the Trino CLI failed (exit {done.returncode}): {done.stderr.strip()[-800:]}")
    lines = list(csv.reader(io.StringIO(done.stdout)))
    # a CSV_HEADER result starts with its header; USE prints nothing
    return CliResult(statements, lines[0] if lines else [], lines[1:])


def product_price(settings: Settings, product_id: str) -> CliResult:
    return run_cli(settings, f"select productId, name, product_price from {settings.catalog.products_table} "
                             f"where productId = '{product_id}';\n")
