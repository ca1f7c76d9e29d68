"""`make bench`: the standard benchmarks, each figure appended as a dated row to docs/benchmarks.md.

A slowdown should show the day it lands, so every run of the standard set leaves one row
per figure in a committed table (and its JSON under results/): date, commit, the figure,
its value and the goal it is held to. Every performance figure the README and docs/ quote comes
from that table.
"""

from __future__ import annotations

import datetime as dt
import json
import subprocess
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from lab.bench.cdc import run as run_cdc
from lab.bench.headroom import run as run_headroom
from lab.bench.ingest import run as run_ingest
from lab.bench.system import run as run_system
from lab.headline import STANDARD_HEADROOM_RATES
from lakehouse.settings import REPO_ROOT, Settings

BENCHMARKS_MD = REPO_ROOT / "docs" / "benchmarks.md"
TABLE_HEADER = "| date (UTC) | commit | benchmark | figure | value | goal | met |"


@dataclass(frozen=True)
class Figure:
    benchmark: str  # the command that measured it
    figure: str
    value: float
    unit: str
    goal: str = ""  # e.g. "<= 3", empty when the figure is context only
    met: bool | None = None

    def cells(self) -> list[str]:
        value = f"{self.value:,.2f}" if abs(self.value) < 100 else f"{self.value:,.0f}"
        met = "" if self.met is None else ("yes" if self.met else "**no**")
        return [f"`{self.benchmark}`", self.figure, f"{value} {self.unit}".strip(), self.goal, met]


def at_most(benchmark: str, figure: str, value: float, unit: str, limit: float) -> Figure:
    return Figure(benchmark, figure, value, unit, f"<= {limit:g} {unit}".strip(), value <= limit)


def at_least(benchmark: str, figure: str, value: float, unit: str, floor: float) -> Figure:
    return Figure(benchmark, figure, value, unit, f">= {floor:,g} {unit}".strip(), value >= floor)


def current_commit() -> str:
    done = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO_ROOT, capture_output=True, text=True)
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO_ROOT,
                           capture_output=True, text=True).stdout.strip()
    return (done.stdout.strip() or "unknown") + ("+changes" if dirty else "")


def append_rows(figures: list[Figure], path: Path = BENCHMARKS_MD, when: dt.datetime | None = None,
                commit: str | None = None) -> None:
    """Add one row per figure to the table at the end of ``path`` (the table must be last in the file)."""
    text = path.read_text()
    if TABLE_HEADER not in text:
        raise ValueError(f"{path} has no benchmark table (header {TABLE_HEADER!r})")
    stamp = (when or dt.datetime.now(dt.timezone.utc)).strftime("%Y-%m-%d %H:%M")
    commit = commit or current_commit()
    rows = "".join(f"| {stamp} | {commit} | {' | '.join(f.cells())} |\n" for f in figures)
    path.write_text(text.rstrip("\n") + "\n" + rows)


def ingest_figures(result, command: str) -> list[Figure]:
    produced_rate = result.produced_rate
    return [
        at_most(command, "freshness p95", result.freshness_p95_s, "s", 3),
        at_most(command, "freshness p99", result.freshness_p99_s, "s", 5),
        Figure(command, "freshness p50", result.freshness_p50_s, "s"),
        at_least(command, "sustained / produced rate", 100 * result.sustained_eps / produced_rate if produced_rate
                 else 0.0, "%", 99),
        Figure(command, "sustained", result.sustained_eps, "events/s"),
        Figure(command, "lag left when the load stopped", result.drain_s, "s"),
        Figure(command, "mean batch", result.batch_mean_s, "s"),
        Figure(command, "raw ceiling (Kafka -> Parquet, no Spark)", result.raw_ceiling_eps, "events/s"),
        *(Figure(command, f"CPU per million events: {part}", seconds, "s")
          for part, seconds in result.cpu_per_million.items()),
    ]


def cdc_figures(result, command: str) -> list[Figure]:
    return [
        at_most(command, "apply freshness p95", result.freshness_p95_s, "s", 5),
        Figure(command, "apply freshness p50", result.freshness_p50_s, "s"),
        at_least(command, "sustained", result.sustained_cps, "changes/s", 0.99 * result.target_rate),
    ]


def cdc_scale_figures(result, command: str, rate: float) -> list[Figure]:
    """`bench cdc --members N`, held to issue 59's goals (peak memory by process tree, as RSS and as PSS)."""
    figures = [
        at_least(command, "initial snapshot", result.snapshot_rows_per_s, "rows/s", 50_000),
        at_least(command, "sustained", result.sustained_cps, "changes/s", 0.99 * rate),
        at_most(command, "apply freshness p95", result.freshness_p95_s, "s", 3),
        Figure(command, "apply freshness p50", result.freshness_p50_s, "s"),
        at_most(command, "write amplification", result.write_amplification, "x", 5),
        at_most(command, "kill -9 of the apply -> applying again", result.restart_s, "s", 60),
        Figure(command, "readers equal to MariaDB (rows, keys, sums, sampled keys)",
               sum(fp == result.fingerprints["mariadb"] and not result.sample_differences.get(name)
                   for name, fp in result.fingerprints.items() if name != "mariadb"), "",
               f"= {len(result.fingerprints) - 1}",
               all(fp == result.fingerprints["mariadb"] for fp in result.fingerprints.values())
               and not any(result.sample_differences.values())),
    ]
    rss_all = {"all": max(result.snapshot_apply_rss_mb, result.apply_rss_mb)}
    for measure, snapshot, changing in (("RSS", result.snapshot_apply_parts_rss_mb, {**result.apply_parts_rss_mb,
                                                                                    **rss_all}),
                                         ("PSS", result.snapshot_apply_parts_pss_mb, result.apply_parts_pss_mb)):
        for part in changing:
            peak = max(snapshot.get(part, 0.0), changing[part])
            if part == "all":
                figures.append(at_most(command, f"apply peak {measure}, all its processes", peak, "MiB", 3072))
            elif len(changing) > 2 or measure == "RSS":
                figures.append(at_most(command, f"apply peak {measure}: {part}", peak, "MiB", 1536))
    executors = {p: mb for p, mb in result.apply_parts_rss_mb.items() if p.startswith("executor")}
    if len(executors) > 1:
        figures.append(at_most(command, "largest executor's share of the executors' RSS",
                               100 * max(executors.values()) / sum(executors.values()), "%", 60))
    return figures


def system_figures(result, command: str) -> list[Figure]:
    figures = [at_most(command, f"{f.name} freshness p95", f.p95_s, "s", f.goal_s) for f in result.freshness]
    figures += [Figure(command, f"{f.name} freshness p50", f.p50_s, "s") for f in result.freshness]
    produced_rate = result.produced / result.duration_s if result.duration_s else 0.0
    figures.append(at_least(command, "sustained / produced rate", 100 * result.sustained_eps / produced_rate
                            if produced_rate else 0.0, "%", 99))
    figures.append(Figure(command, "exactly-once checks passed", sum(c.ok for c in result.checks), "",
                          f"= {len(result.checks)}", result.exact))
    figures += [Figure(command, f"CPU under load: {part}", cores, "cores") for part, cores in result.cpu_cores.items()]
    return figures


def headroom_figures(result, command: str) -> list[Figure]:
    return [
        at_least(command, "highest rate held / raw ceiling", 100 * result.ratio, "%", 50),
        Figure(command, "highest rate held (p95 <= 10 s)", result.best_eps, "events/s"),
        Figure(command, "raw ceiling (Kafka -> Parquet, no Spark)", result.raw_ceiling_eps, "events/s"),
        Figure(command, "the pipeline alone (catch-up) / raw ceiling", 100 * result.catch_up_ratio, "%"),
        Figure(command, "the pipeline alone (catch-up, nothing producing)", result.catch_up_eps, "events/s"),
    ]



def run_standard(settings: Settings, out_dir: Path, ingest_seconds: float, cdc_seconds: float,
                 system_seconds: float, console, progress: Callable[[str], None] = print,
                 headroom_seconds: float = 30) -> list[Figure]:
    """The standard set at the issue's rates and shorter durations; figures saved as JSON in ``out_dir``."""

    figures: list[Figure] = []
    progress(f"ingest: 10,000 events/s for {ingest_seconds:.0f}s")
    ingest = run_ingest(settings, 10_000, ingest_seconds, out_dir, progress=progress)
    figures += ingest_figures(ingest, f"bench ingest --rate 10000 --duration {ingest_seconds:.0f}")
    progress(f"cdc: 1,000 changes/s for {cdc_seconds:.0f}s")
    cdc = run_cdc(settings, 1000, cdc_seconds, progress=progress)
    figures += cdc_figures(cdc, f"bench cdc --rate 1000 --duration {cdc_seconds:.0f}")
    rates = ",".join(str(r) for r in STANDARD_HEADROOM_RATES)
    progress(f"headroom: {rates} events/s, {headroom_seconds:.0f}s each")
    headroom = run_headroom(settings, list(STANDARD_HEADROOM_RATES), headroom_seconds, out_dir, progress=progress)
    figures += headroom_figures(headroom, f"bench headroom --rates {rates} --seconds {headroom_seconds:.0f}")
    progress(f"system: 2,000 events/s + 20 changes/s, everything running, for {system_seconds:.0f}s")
    (out_dir / "system").mkdir(exist_ok=True)
    system = run_system(settings, 2000, 20, system_seconds, out_dir / "system", console)
    figures += system_figures(system, f"bench system --duration {system_seconds:.0f}")
    (out_dir / "bench-standard.json").write_text(json.dumps(
        {"ingest": asdict(ingest), "cdc": asdict(cdc), "headroom": headroom.as_dict(), "system": asdict(system),
         "figures": [asdict(f) for f in figures]}, indent=2))
    return figures


def cdc_peer_figures(results: list, command: str) -> list[Figure]:
    """`bench cdc-peers` at one size, held to issue 61's goals: this pipeline's apply at most the better peer's
    p95, for no more CPU, and each reader at least as fast on its table as on the peers'."""
    figures = []
    ours = next((r for name, r in results if name == "pipeline"), None)
    peers = [(name, r) for name, r in results if name != "pipeline"]
    for name, r in results:
        at = f"{command} ({name})"
        if r is ours and peers:
            figures.append(at_most(at, "freshness p95", r.freshness_p95_s, "s",
                                   min(p.freshness_p95_s for _, p in peers)))
            figures.append(at_most(at, "CPU per million changes", r.cpu_s_per_million, "s",
                                   min(p.cpu_s_per_million for _, p in peers)))
        else:
            figures += [Figure(at, "freshness p95", r.freshness_p95_s, "s"),
                        Figure(at, "CPU per million changes", r.cpu_s_per_million, "s")]
        figures += [Figure(at, "freshness p50", r.freshness_p50_s, "s"), Figure(at, "freshness p99", r.freshness_p99_s, "s"),
                    Figure(at, "sustained", r.sustained_cps, "changes/s"),
                    Figure(at, "initial snapshot", r.snapshot_rows_per_s, "rows/s"),
                    Figure(at, "peak RSS while changing", r.apply_rss_mb, "MiB"),
                    Figure(at, "write amplification", r.write_amplification, "x"),
                    Figure(at, "delete files at the end", r.delete_files_end, "")]
        for reader, cost in r.readers.items():
            if isinstance(cost, str):
                figures.append(Figure(at, f"{reader} reads the table", 0, "", "", False))
                continue
            for what, seconds in (("point query p95", cost.point_p95_s), ("count p95", cost.count_p95_s)):
                best_peer = min((p.readers[reader].point_p95_s if what.startswith("point") else p.readers[reader].count_p95_s
                                 for _, p in peers if not isinstance(p.readers.get(reader, ""), str)), default=None)
                figures.append(at_most(at, f"{reader} {what}", seconds, "s", best_peer) if r is ours and best_peer
                               else Figure(at, f"{reader} {what}", seconds, "s"))
        figures.append(Figure(at, "equal to MariaDB (rows, keys, sums, sampled keys)",
                              float(all(fp == r.fingerprints["mariadb"] for fp in r.fingerprints.values())
                                    and not any(r.sample_differences.values())), "", "= 1",
                              all(fp == r.fingerprints["mariadb"] for fp in r.fingerprints.values())
                              and not any(r.sample_differences.values())))
    return figures
