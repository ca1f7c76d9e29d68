"""`lakehouse bench enrichment`: the cost of each way to join clicks with a real-size member table."""

from __future__ import annotations

from typing import Annotated

import typer

from cli.common import console, friendly_errors, print_figures, stack_settings_or_exit


def enrichment(
    members: Annotated[int, typer.Option(help="Members loaded (`lakehouse load dims --members N`): keys are drawn "
                                              "from them as the load generator draws them.")] = 10_000_000,
    database: Annotated[str, typer.Option(help="The source database holding them.")] = "shop",
    table: Annotated[str | None, typer.Option(help="The Iceberg member table their capture wrote "
                                                    "(default: the settings' catalog.members_table).")] = None,
    batch_events: Annotated[int, typer.Option(help="Events a batch (10,000 = one 1 s trigger at 10,000/s).")] = 10_000,
    batches: Annotated[int, typer.Option(help="Batches timed (the cache's hit ratio settles over them).")] = 30,
    cache_rows: Annotated[int, typer.Option(help="Keys a lookup cache holds per process.")] = 200_000,
) -> None:
    """Seconds a batch spends enriching, and memory held, for each join strategy of issue 41.

    Whole table in memory (today), an Iceberg lookup per batch, a database lookup per batch with
    and without a bounded cache. Run it on an otherwise idle stack: it times one process.
    """
    from lab.bench.enrichment import run
    from loadgen.key_space import KeySpace

    settings = stack_settings_or_exit("kafka", "s3", "metastore", "mariadb")
    settings.mariadb.database = database
    with friendly_errors():
        costs = run(settings, KeySpace(members=members), table or settings.catalog.members_table, batches,
                    batch_events, cache_rows)
    print_figures(f"enrichment against {members:,} members, batches of {batch_events:,} events", [
        (c.strategy, f"{c.seconds_per_batch:.3f} s a batch, {c.memory_mb:,.0f} MiB held" + (f"; {c.note}" if c.note else ""))
        for c in costs])
    console.print("docs/performance.md says which strategy the click job uses, and why.")
