"""`lakehouse load`: data into the sources. `clicks`: Locust, headless, at a controlled rate, with reports;
`dims`: the shop database's dimensions at real size."""

from __future__ import annotations

from typing import Annotated

import typer

from cli.common import console, friendly_errors
from lakehouse.settings import load_settings, results_path

app = typer.Typer(help="Load the sources: ClickEvents into Kafka (`clicks`), rows into the shop database (`dims`).",
                  no_args_is_help=True)


@app.command()
def clicks(
    rate: Annotated[float, typer.Option(help="Target ClickEvents/s in total (held whatever the user count).")] = 1000,
    duration: Annotated[str, typer.Option(help="Run time: 60, 60s, 2m, 1h.")] = "60s",
    shape: Annotated[str, typer.Option(help="Rate shape: constant, step, ramp or spike.")] = "constant",
    bad_share: Annotated[float, typer.Option(help="Share of deliberately bad events (0-1).")] = 0.0,
    users: Annotated[int, typer.Option(help="Locust users per run (rate does not depend on it).")] = 4,
    workers: Annotated[int, typer.Option(help="Locust worker processes (>1 = distributed, for high rates).")] = 1,
    db_change_rate: Annotated[float, typer.Option(help="Database changes/s against MariaDB (0 = none).")] = 0.0,
    new_field: Annotated[list[str] | None, typer.Option(
        help="NAME:TYPE of a field beyond the ClickEvent contract that events start carrying, as an app release "
             "adds one (string, integer, number, boolean); repeatable. With schema_policy=evolve the click "
             "table gains the column in the batch that first carries it.")] = None,
    rollout: Annotated[str, typer.Option(
        help="Share of events carrying --new-field, rising linearly over the run: 10%->100% (or one share).")]
        = "100%",
    keys: Annotated[str, typer.Option(
        help="Where uid and productId come from: members=N,products=M[,skew=S][,unknown=U] draws them from the "
             "dimensions `lakehouse load dims` loaded (10 % unknown, as the seed; skew: Zipf exponent, a few hot "
             "products). Empty: the seed's 5 members and products 0-19.")] = "",
) -> None:
    """Produce ClickEvents (and database changes) with Locust; CSV + HTML reports go to results/.

    Exits non-zero when the achieved rate is under 95 % of the target: a run that cannot keep up says so.
    """
    from loadgen.key_space import KeySpace
    from loadgen.rollout import NewField, Rollout
    from loadgen.run import parse_duration, run

    if not 0 <= bad_share <= 1:
        raise typer.BadParameter("must be between 0 and 1", param_hint="--bad-share")
    new_fields = tuple(new_field or ())
    try:
        for text in new_fields:
            NewField.parse(text)
        Rollout.parse(rollout)
        KeySpace.parse(keys)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None
    out = results_path("load")
    with friendly_errors():
        seconds = parse_duration(duration)
        with console.status(f"Locust: {rate:,.0f} events/s ({shape}) for {seconds:.0f}s..."):
            result = run(rate, seconds, shape, bad_share, users, workers, db_change_rate, out,
                         new_fields=new_fields, rollout=rollout, keys=keys)
    console.print(f"delivered {result.delivered:,} events ({result.failed} failed) in {seconds:.0f}s = "
                  f"{result.achieved_rate:,.0f}/s; target {result.target_events:,.0f} events "
                  f"({result.target_events / seconds:,.0f}/s mean); produce latency p50 {result.produce_p50_ms:.0f} ms, "
                  f"p99 {result.produce_p99_ms:.0f} ms")
    console.print(f"reports: {out / 'report.html'}, {out}/locust_stats.csv")
    if not result.reached:
        console.print("[red]target NOT reached[/]: add --workers, or lower --rate")
        raise typer.Exit(1)


@app.command()
def dims(
    members: Annotated[int, typer.Option(help="Generated rows of user_member (keys 10000000, 10000001, ...).",
                                         min=0)] = 1_000_000,
    products: Annotated[int, typer.Option(help="Generated rows of products (keys 100000, 100001, ...).", min=0)] = 0,
    database: Annotated[str | None, typer.Option(help="Source database (default: mariadb.database).")] = None,
) -> None:
    """Fill the shop database with MEMBERS members and PRODUCTS products, and report the rate.

    Rows that exist already are skipped, so loading twice adds nothing. A running capture streams
    the new rows like any insert; loaded before its first run, they are part of its initial snapshot.

    Example: lakehouse load dims --members 10000000 --products 1000000
    """
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from loadgen.dimensions import load_table

    settings = load_settings()
    with friendly_errors(), Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                     TimeElapsedColumn(), console=console, transient=True) as bar:
        for table, rows in (("user_member", members), ("products", products)):
            if not rows:
                continue
            task = bar.add_task(f"{table:<12}", total=rows)
            result = load_table(settings, table, rows, database, progress=lambda done, t=task: bar.update(t, completed=done))
            bar.console.print(f"{table}: {result.requested:,} rows ({result.added:,} new) in {result.seconds:.1f} s "
                              f"= {result.rows_per_s:,.0f} rows/s")
