"""`lakehouse sql`: an interactive SQL shell over the lakehouse, or a script of statements."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from cli.common import console, settings_or_exit

META = {"quit", "exit", "help"}
HELP = """Statements end with ';' (Enter on an unfinished one starts a new line). Tables by plain name:
  SHOW SCHEMAS;  USE ods_behavior;  SHOW TABLES;  DESCRIBE clickevent;  SHOW CREATE TABLE clickevent;
  SELECT count(*) FROM clickevent;  SELECT * FROM ods_behavior."clickevent$snapshots";
Metadata tables: "table$snapshots", "$files", "$history", "$partitions". quit or Ctrl-D leaves."""


def sql(
    file: Annotated[Path | None, typer.Option("--file", "-f", help="Run the statements in this file and exit.",
                                              exists=True, dir_okay=False)] = None,
    execute: Annotated[str | None, typer.Option("--execute", "-e", help="Run these statements and exit.")] = None,
    engine: Annotated[str, typer.Option(help="duckdb (local stack, default), spark, or trino (Kubernetes, "
                                             "through `make trino`).")] = "duckdb",
    schema: Annotated[str | None, typer.Option(help="Schema for bare table names (as `USE schema`).")] = None,
    fmt: Annotated[str, typer.Option("--format", help="table, csv or json (one object per line).")] = "table",
) -> None:
    """SQL the way Trino users work: plain table names, SHOW / DESCRIBE / USE, one shell for every engine.

    Interactive on a terminal (history, multi-line statements, timing per statement); with
    -f, -e or piped input it runs the statements in order and stops at the first error
    (exit code 1).

    Examples:\n
      lakehouse sql\n
      echo "use catalog iceberg; show schemas; use ods_behavior; select * from clickevent limit 10;" | lakehouse sql\n
      lakehouse sql -e "select count(*) from ods_behavior.clickevent" --format csv\n
      lakehouse sql -f my_queries.sql --engine spark
    """
    from queries import output
    from queries.engines import ENGINES, open_session

    if engine not in ENGINES:
        raise typer.BadParameter(f"unknown engine {engine!r}; choose one of {', '.join(ENGINES)}", param_hint="--engine")
    if fmt not in output.FORMATS:
        raise typer.BadParameter(f"unknown format {fmt!r}; choose one of {', '.join(output.FORMATS)}",
                                 param_hint="--format")
    settings = settings_or_exit()
    if engine == "trino":
        from cli.trino import ensure_local_trino

        ensure_local_trino(settings)
    script = file.read_text() if file else execute if execute is not None else \
        None if sys.stdin.isatty() else sys.stdin.read()
    with console.status(f"connecting to {engine}..."):
        session = open_session(engine, settings, schema)
    if script is None:
        _interactive(session, fmt, settings.run_dir / "sql_history")
    else:
        raise typer.Exit(_run_script(session, script, fmt))


def _show(outcome, fmt: str) -> None:
    from queries import output

    timing = f"{outcome.message} in {outcome.seconds:.2f} s"
    if outcome.table is None:
        console.print(timing, style="dim")
    elif fmt == "table":
        output.write(outcome.table, fmt, console, footer=timing)
    else:
        output.write(outcome.table, fmt, console)
        console.print(timing, style="dim")


def _run_script(session, script: str, fmt: str) -> int:
    """Run each statement; the first error ends the script with exit code 1."""
    from queries.errors import EngineGap
    from queries.session import split_statements

    try:
        statements = split_statements(script)
    except EngineGap as exc:
        console.print(f"[red]{exc}[/red]")
        return 1
    for number, statement in enumerate(statements, 1):
        try:
            outcome = session.execute(statement)
        except (EngineGap, KeyError, ValueError) as exc:
            console.print(f"[red]statement {number} failed: {_message(exc)}[/red]")
            more = " ..." if "\n" in statement else ""
            console.print(f"  {statement.splitlines()[0]}{more}", style="dim")
            return 1
        _show(outcome, fmt)
    return 0


def _message(exc: BaseException) -> str:
    return str(exc.args[0]) if exc.args else str(exc)


def _interactive(session, fmt: str, history: Path, terminal_in=None, terminal_out=None) -> None:
    """The shell; ``terminal_in`` / ``terminal_out`` replace the terminal (prompt_toolkit's pipe input in tests)."""
    from prompt_toolkit import PromptSession
    from prompt_toolkit.history import FileHistory
    from prompt_toolkit.key_binding import KeyBindings

    from queries.errors import EngineGap
    from queries.session import is_complete, split_statements

    bindings = KeyBindings()

    @bindings.add("enter")
    def _(event):
        text = event.current_buffer.text
        if is_complete(text) or text.strip().lower() in META or not text.strip():
            event.current_buffer.validate_and_handle()
        else:
            event.current_buffer.insert_text("\n")

    history.parent.mkdir(parents=True, exist_ok=True)
    prompt = PromptSession(history=FileHistory(str(history)), multiline=True, key_bindings=bindings,
                           prompt_continuation=lambda width, *_: "-> ".rjust(width),
                           input=terminal_in, output=terminal_out)
    console.print(f"lakehouse sql on {session.engine_name}: 'help' for examples, 'quit' or Ctrl-D to leave")
    while True:
        try:
            text = prompt.prompt(f"{session.engine_name}:{session.schema or ''}> ")
        except KeyboardInterrupt:
            continue  # Ctrl-C drops the statement being typed
        except EOFError:
            return
        word = text.strip().rstrip(";").strip().lower()
        if word in ("quit", "exit"):
            return
        if word == "help":
            console.print(HELP)
            continue
        try:
            for statement in split_statements(text):
                _show(session.execute(statement), fmt)
        except (EngineGap, KeyError, ValueError) as exc:
            console.print(f"[red]{_message(exc)}[/red]")
        except KeyboardInterrupt:
            console.print("cancelled", style="dim")
