"""`lakehouse load`: Locust, headless, at a controlled rate, with reports."""

from __future__ import annotations

from typing import Annotated

import typer

from lakehouse.cli.common import console, friendly_errors
from lakehouse.settings import results_path


def load(
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
) -> None:
    """Produce ClickEvents (and database changes) with Locust; CSV + HTML reports go to results/.

    Exits non-zero when the achieved rate is under 95 % of the target: a run that cannot keep up says so.
    """
    from loadgen.rollout import NewField, Rollout
    from loadgen.run import parse_duration, run

    if not 0 <= bad_share <= 1:
        raise typer.BadParameter("must be between 0 and 1", param_hint="--bad-share")
    new_fields = tuple(new_field or ())
    try:
        for text in new_fields:
            NewField.parse(text)
        Rollout.parse(rollout)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None
    out = results_path("load")
    with friendly_errors():
        seconds = parse_duration(duration)
        with console.status(f"Locust: {rate:,.0f} events/s ({shape}) for {seconds:.0f}s..."):
            result = run(rate, seconds, shape, bad_share, users, workers, db_change_rate, out,
                         new_fields=new_fields, rollout=rollout)
    console.print(f"delivered {result.delivered:,} events ({result.failed} failed) in {seconds:.0f}s = "
                  f"{result.achieved_rate:,.0f}/s; target {result.target_events:,.0f} events "
                  f"({result.target_events / seconds:,.0f}/s mean); produce latency p50 {result.produce_p50_ms:.0f} ms, "
                  f"p99 {result.produce_p99_ms:.0f} ms")
    console.print(f"reports: {out / 'report.html'}, {out}/locust_stats.csv")
    if not result.reached:
        console.print("[red]target NOT reached[/]: add --workers, or lower --rate")
        raise typer.Exit(1)
