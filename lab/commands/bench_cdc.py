"""`lakehouse bench cdc --members N`: the at-scale CDC benchmark's run and its table of figures."""

from __future__ import annotations

import os

import typer

from cli.common import console, friendly_errors, print_figures

#: what `bench cdc --apply` accepts, and how the figures' title names it
APPLY_TITLES = {"pipeline": "", "merge-peer": " (the MERGE INTO peer)", "python-peer": " (the Python-process peer)"}


def cdc_at_scale(settings, rate: float, duration: float, members: int, engines: tuple[str, ...],
                  chaos: bool, keep: bool = False, apply: str = "pipeline", record: bool = False) -> None:
    from lab.bench.cdc_scale import run

    with friendly_errors():
        r = run(settings, members, rate, duration, progress=console.log, engines=engines, chaos=chaos, keep=keep,
                apply=apply)
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
        ("apply freshness p50 / p95 (s)", f"{r.freshness_p50_s:.2f} / {r.freshness_p95_s:.2f}"),
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
           f"{c.point_p95_s:.2f} / {c.count_p95_s:.2f}, {c.delete_files}, {c.deleted_rows:,}")
          for when, c in (("after the snapshot", r.reads_start),
                          *((f"{at / 60:.0f} min into the changes", c) for at, c in r.reads_during),
                          ("at the end", r.reads_end)) if c is not None),
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
            + ("" if apply == "pipeline" else f" --apply {apply}") + (" --chaos" if chaos else "")
        record_figures(cdc_scale_figures(r, command, rate))
