"""`lakehouse bench cdc --members N`: the at-scale CDC benchmark's run and its table of figures."""

from __future__ import annotations

import json
import os
from typing import Annotated

import typer

from cli.common import console, friendly_errors, print_figures, stack_settings_or_exit

#: what `bench cdc --apply` accepts, and how the figures' title names it
APPLY_TITLES = {"pipeline": "", "merge-peer": " (the MERGE INTO peer)", "python-peer": " (the Python-process peer)",
                "flink-peer": " (the Flink upsert peer)"}


def cdc_at_scale(settings, rate: float, duration: float, members: int, engines: tuple[str, ...],
                  chaos: bool, keep: bool = False, apply: str = "pipeline", record: bool = False,
                  flink_checkpoint_s: float = 1.0) -> None:
    from lab.bench.cdc_scale import run

    with friendly_errors():
        r = run(settings, members, rate, duration, progress=console.log, engines=engines, chaos=chaos, keep=keep,
                apply=apply, flink_checkpoint_s=flink_checkpoint_s)
    same = {name: fp == r.fingerprints["mariadb"] for name, fp in r.fingerprints.items() if name != "mariadb"}
    print_figures(f"CDC at scale{APPLY_TITLES[apply]}: {members:,} members, "
                  f"{rate:,.0f} changes/s for {duration:.0f}s", [
        ("load into MariaDB (rows/s)", f"{r.load_rows_per_s:,.0f}"),
        ("initial snapshot, capture start -> last row committed (rows/s)", f"{r.snapshot_rows_per_s:,.0f}"),
        ("peak RSS during the snapshot: capture / apply (MiB)",
         f"{r.snapshot_capture_rss_mb:,.0f} / {r.snapshot_apply_rss_mb:,.0f}"),
        ("cores used through the snapshot", ", ".join(f"{part} {cores:.2f}" for part, cores in r.snapshot_cores.items())),
        ("changes written", f"{r.changes:,}"),
        ("sustained changes/s (applied while the load ran)", f"{r.sustained_cps:,.0f}"),
        ("apply freshness p50 / p95 / p99 (s)",
         f"{r.freshness_p50_s:.2f} / {r.freshness_p95_s:.2f} / {r.freshness_p99_s:.2f}"),
        ("apply CPU seconds per million changes", f"{r.cpu_s_per_million:,.0f}"),
        ("bytes added per change (data + deletes + folds)", f"{r.bytes_per_change:,.0f}"),
        ("raw bytes of a changed row", f"{r.row_bytes:,.0f}"),
        ("write amplification (bytes added per change / raw bytes of the row)", f"{r.write_amplification:.1f}x"),
        ("data files / delete files at the end", f"{r.data_files_end} / {r.delete_files_end}"),
        ("apply peak RSS while changing (MiB)", f"{r.apply_rss_mb:,.0f}"),
        *((("apply peak RSS by process tree, snapshot / changing (MiB)",
            ", ".join(f"{part} {r.snapshot_apply_parts_rss_mb.get(part, 0):,.0f} / {mb:,.0f}"
                      for part, mb in r.apply_parts_rss_mb.items())),) if len(r.apply_parts_rss_mb) > 1 else ()),
        *((("apply peak PSS by process tree, snapshot / changing (MiB; shared pages counted once)",
            ", ".join(f"{part} {r.snapshot_apply_parts_pss_mb.get(part, 0):,.0f} / {mb:,.0f}"
                      for part, mb in r.apply_parts_pss_mb.items())),) if len(r.apply_parts_pss_mb) > 2 else ()),
        *((("executors' shares of their RSS while changing (the key state each holds)",
            ", ".join(f"{part} {mb / executors:.1%}" for part, mb in r.apply_parts_rss_mb.items()
                      if part.startswith("executor"))),) if (executors := sum(
            mb for part, mb in r.apply_parts_rss_mb.items() if part.startswith("executor"))) else ()),
        ("apply killed after the changes, restarted: s until it applied again, its peak RSS (MiB)",
         f"{r.restart_s:.1f}, {r.restart_rss_mb:,.0f}"),
        ("cores used while changing", ", ".join(f"{part} {cores:.2f}" for part, cores in r.cores.items())),
        *((f"DuckDB point query p95 / full count p95 (s), delete files, deleted rows: {when}",
           c if isinstance(c, str) else f"{c.point_p95_s:.2f} / {c.count_p95_s:.2f}, {c.delete_files}, {c.deleted_rows:,}")
          for when, c in (("after the snapshot", r.reads_start),
                          *((f"{at / 60:.0f} min into the changes", c) for at, c in r.reads_during),
                          ("at the end", r.reads_end)) if c is not None),
        *((f"{reader}: point query p95 / full count p95 (s) at the end", _cost(cost))
          for reader, cost in r.readers.items()),
        *((("kill -9, then restarted", "; ".join(r.kills)),) if r.kills else ()),
        ("rows, keys, sums equal to MariaDB's", ", ".join(f"{k}: {'yes' if v else 'NO'}" for k, v in same.items())),
        ("sampled changed keys differing", ", ".join(f"{k}: {v}" for k, v in r.sample_differences.items())),
    ])
    if not all(same.values()) or any(r.sample_differences.values()):
        console.print(f"[red]readers disagree with MariaDB[/]: {r.fingerprints}")
        raise typer.Exit(1)
    if record:
        from lab.bench.record import cdc_scale_figures
        from lab.commands.common import record_figures

        # the environment that changes what runs: Spark's master (executors), the pipeline's settings
        env = " ".join(f"{k}={v}" for k, v in sorted(os.environ.items())
                       if k == "SPARK_MASTER" or k.startswith("LAKEHOUSE_PIPELINE__"))
        command = (f"{env} " if env else "") + f"bench cdc --members {members} --rate {rate:g} --duration {duration:g}" \
            + ("" if apply == "pipeline" else f" --apply {apply}") + (" --chaos" if chaos else "") \
            + (f" --flink-checkpoint {flink_checkpoint_s:g}" if apply == "flink-peer" else "")
        record_figures(cdc_scale_figures(r, command, rate))


def _cost(cost) -> str:
    """A reader's cost at the end (``lab.bench.cdc_scale.reader_costs``): two p95s, or why it cannot read."""
    return cost if isinstance(cost, str) else f"{cost.point_p95_s:.2f} / {cost.count_p95_s:.2f}"


#: the systems `bench cdc-peers` runs, in order: this pipeline's apply, Iceberg's standard Spark path, seed 004's design
CDC_PEERS = ("pipeline", "merge-peer", "flink-peer")


def cdc_peers(
    members: Annotated[str, typer.Option(help="Comma-separated table sizes; each system runs at each.")]
        = "1000000,10000000",
    rate: Annotated[float, typer.Option(help="Database changes per second while changing.")] = 1000,
    duration: Annotated[float, typer.Option(help="Seconds of changes per system and size.")] = 300,
    systems: Annotated[str, typer.Option(
        help="Which, in order: 'pipeline' (`lakehouse run dims`, its default settings), 'merge-peer' (Spark "
             "MERGE INTO each batch, merge-on-read), 'flink-peer' (seed 004's Flink upsert sink: equality deletes; "
             "the first run installs Flink's own environment, ~1 min).")] = ",".join(CDC_PEERS),
    flink_checkpoint: Annotated[float, typer.Option(
        help="The Flink peer's checkpoint interval in seconds (its sink commits once per checkpoint).")] = 1.0,
    engines: Annotated[str, typer.Option(help="The readers checked against MariaDB at the end.")]
        = "duckdb,spark,trino",
    record: Annotated[bool, typer.Option(help="Also append the figures as dated rows to docs/benchmarks.md.")]
        = False,
) -> None:
    """The same change stream into the same member table through this pipeline's apply, Spark's MERGE INTO and
    Flink's upsert sink, one after another on one stack: freshness, changes/s, CPU, memory, files, and what a
    reader pays afterwards (DuckDB, Trino, PyIceberg), every table checked against MariaDB.

    Each system gets a fresh world (database, topics, tables) loaded with the same generated members and
    fed by the same seeded change generator, live (freshness counts from each change's database commit).
    `make bench-cdc-peers` runs it at 1 M and 10 M rows; docs/peers.md says how each peer is configured.
    """
    from dataclasses import asdict

    from lab.bench.cdc_scale import run
    from lab.bench.record import cdc_peer_figures
    from lab.commands.bench_ingest import CLICK_STACK
    from lab.commands.common import record_figures
    from lakehouse.settings import results_path

    settings = stack_settings_or_exit(*CLICK_STACK, "mariadb")
    chosen = [name.strip() for name in systems.split(",") if name.strip()]
    unknown = [name for name in chosen if name not in CDC_PEERS]
    if unknown:
        raise typer.BadParameter(f"each one of {', '.join(CDC_PEERS)}; got {', '.join(unknown)}", param_hint="--systems")
    sizes = [int(float(n)) for n in members.split(",") if n.strip()]
    out = results_path("bench-cdc-peers")
    out.mkdir(parents=True, exist_ok=True)
    saved = out / "bench-cdc-peers.json"
    command = (f"bench cdc-peers --members {{members}} --rate {rate:g} --duration {duration:g} "
               f"--flink-checkpoint {flink_checkpoint:g}")
    results: list = []
    with friendly_errors():
        for size in sizes:
            for name in chosen:
                console.rule(f"{name}{APPLY_TITLES[name]}: {size:,} members, {rate:,.0f} changes/s for {duration:.0f}s")
                results.append((name, run(settings, size, rate, duration, progress=console.log,
                                          engines=tuple(e for e in engines.split(",") if e), apply=name,
                                          flink_checkpoint_s=flink_checkpoint)))
                # each run kept as it ends: a long command stopped half-way keeps what it measured
                saved.write_text(json.dumps([{"system": n, **asdict(r)} for n, r in results], indent=2, default=str))
                _peers_table(size, results[-1:])
            _peers_table(size, [(n, r) for n, r in results if r.members == size])
            if record:
                record_figures(cdc_peer_figures([(n, r) for n, r in results if r.members == size],
                                                command.format(members=size)))
    console.print(f"saved {saved}")


def _peers_table(size: int, results: list) -> None:
    """One size's systems side by side (rows: figures; columns: systems)."""
    from rich.table import Table

    table = Table(title=f"CDC peers at {size:,} members: the same change stream, one system after another")
    table.add_column("figure")
    for name, _ in results:
        table.add_column(name, justify="right")
    rows = [
        ("initial snapshot (rows/s)", lambda r: f"{r.snapshot_rows_per_s:,.0f}"),
        ("sustained changes/s", lambda r: f"{r.sustained_cps:,.0f}"),
        ("caught up after the changes (within 300 s)", lambda r: "yes" if r.caught_up else "NO"),
        ("freshness p50 / p95 / p99 (s)",
         lambda r: f"{r.freshness_p50_s:.2f} / {r.freshness_p95_s:.2f} / {r.freshness_p99_s:.2f}"),
        ("CPU s per million changes", lambda r: f"{r.cpu_s_per_million:,.0f}"),
        ("peak RSS while changing (MiB)", lambda r: f"{r.apply_rss_mb:,.0f}"),
        ("write amplification", lambda r: f"{r.write_amplification:.1f}x"),
        ("data / delete files at the end", lambda r: f"{r.data_files_end} / {r.delete_files_end}"),
        ("kill -9 -> applying again (s)", lambda r: f"{r.restart_s:.1f}"),
        *((f"{reader}: point / count p95 (s)", lambda r, reader=reader: _cost(r.readers.get(reader, "-")))
          for reader in ("duckdb", "trino", "pyiceberg")),
        ("equal to MariaDB (rows, keys, sums; sampled keys)", lambda r: ", ".join(
            f"{name} {'yes' if fp == r.fingerprints['mariadb'] and not r.sample_differences.get(name) else 'NO'}"
            for name, fp in r.fingerprints.items() if name != "mariadb")),
    ]
    for label, cell in rows:
        table.add_row(label, *(cell(r) for _, r in results))
    console.print(table)
