"""The harness's commands: `lakehouse bench ...`, `chaos`, `demo` and `report`.

They drive ``lab/`` (benchmarks, soaks, fault injection, the demo), so they live with it and
reach the command line as a plugin (the ``lakehouse.commands`` entry point in pyproject.toml),
not from the product's ``cli``: the image, which holds no ``lab/``, lists only commands that
can run there. Like ``cli``'s, each command imports what it runs inside its own body, so
`lakehouse --help` stays instant.
"""

from __future__ import annotations

import typer

from lab.commands import bench, chaos, demo, report


def register(app: typer.Typer) -> None:
    """Add the harness's commands to the `lakehouse` command."""
    app.add_typer(bench.app, name="bench")
    app.command(name="chaos")(chaos.chaos)
    app.command(name="demo")(demo.demo)
    app.command(name="report")(report.report)
