"""Run faults one at a time under steady load, then prove nothing was lost or duplicated.

Ground truth is kept outside the pipeline: the click events the broker acknowledged
(lab.chaos.steady) and the rows the source database holds at the end. Each fault gets a
row: how long until the system had caught up (see checks), how many of the events
produced during its window are missing from the click table or in it twice, and how
many pipeline processes crashed (and were restarted by the supervisor) because of it.
"""

from __future__ import annotations

import csv
import logging
import os
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path

from deploy.local.stack import LocalStack
from lab.chaos import checks
from lab.chaos.faults import Context, Fault
from lab.chaos.fleet import Fleet
from lab.chaos.steady import SteadyChanges, SteadyClicks
from lab.reconcile import differences, lake_rows, source_rows, wait_until_equal
from lakehouse.errors import LakehouseError
from lakehouse.settings import Settings, load_settings
from lakehouse.settings_env import side_by_side_env
from pipeline.spark_session import build_session

log = logging.getLogger(__name__)

CHAOS_PORT_SHIFT = 200  # beside the developer's stack (+0) and the test suite's (+100)


@contextmanager
def chaos_stack(run_dir: Path, disk_mb: int = 4096, progress: Callable[[str], None] = print
                ) -> Iterator[tuple[Settings, dict[str, str], object]]:
    """A local stack of the suite's own: ports +200 and, as root, its run directory on a tmpfs of ``disk_mb``.

    The bounded tmpfs is what makes the disk-full fault safe. The stack is stopped and
    its data dropped at the end; so is the tmpfs.
    """

    env = {**os.environ, **side_by_side_env(run_dir, CHAOS_PORT_SHIFT)}
    saved = dict(os.environ)
    os.environ.update(env)
    if os.path.ismount(run_dir):  # left by an interrupted run
        LocalStack(load_settings()).down()
        subprocess.run(["umount", "--lazy", str(run_dir)], check=False)
    LocalStack(load_settings()).down(purge=True)
    run_dir.mkdir(parents=True, exist_ok=True)
    mounted = False
    if os.geteuid() == 0:
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={disk_mb}m,mode=0755", "lakehouse-chaos",
                               str(run_dir)], capture_output=True, text=True)
        mounted = done.returncode == 0
        if not mounted:
            progress(f"no tmpfs for {run_dir} ({done.stderr.strip()}); the disk-full fault will be skipped")
    stack = LocalStack(load_settings())
    try:
        stack.up(progress=progress)
        yield load_settings(), env, stack
    finally:
        stack.down(purge=not mounted)
        if mounted:
            subprocess.run(["umount", "--lazy", str(run_dir)], check=False)
            run_dir.rmdir()
        os.environ.clear()
        os.environ.update(saved)


@dataclass
class Row:
    fault: str
    note: str
    recovery_s: float | None
    lost: int = 0
    duplicated: int = 0
    crashes: int = 0
    began_ms: int = 0


@dataclass
class ChaosReport:
    rows: list[Row]
    acknowledged: int = 0
    committed: int = 0
    unacknowledged_landed: int = 0
    dims_equal: bool = False
    dims_differences: dict = field(default_factory=dict)
    aggregate_gaps: dict = field(default_factory=dict)
    skewed: int = 0
    skewed_dead_lettered: int = 0
    changes_made: int = 0
    failures: list[str] = field(default_factory=list)

    def write_csv(self, path: Path) -> None:
        with path.open("w", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=list(asdict(self.rows[0])))
            writer.writeheader()
            writer.writerows(asdict(r) for r in self.rows)


def run_chaos(settings: Settings, env: dict[str, str], stack, faults: list[Fault], out_dir: Path,
              rate: float = 200.0, change_rate: float = 4.0, outage_seconds: float = 30.0,
              settle_seconds: float = 10.0, recovery_timeout: float = 300.0,
              progress: Callable[[str], None] = print) -> ChaosReport:
    """Inject ``faults`` in order into the running ``stack``; the pipeline runs as `lakehouse run` processes."""

    spark = build_session(settings, "lakehouse-chaos")
    fleet = Fleet(env, out_dir / "logs").start()
    try:
        clicks = SteadyClicks(settings, rate).start()
        changes = SteadyChanges(settings, change_rate).start()
        try:
            rows, skewed = _inject_all(spark, settings, stack, fleet, clicks, faults, outage_seconds, settle_seconds,
                                       recovery_timeout, progress, f"{rate:,.0f} click events/s and "
                                       f"{change_rate:g} database changes/s", out_dir)
        finally:
            clicks.stop()
            changes.stop()
        report = _verify(spark, settings, rows, clicks, skewed, recovery_timeout, progress)
        report.changes_made = changes.made
    finally:
        fleet.stop()
        spark.stop()
    report.write_csv(out_dir / "chaos.csv")
    return report


def _inject_all(spark, settings: Settings, stack, fleet: Fleet, clicks: SteadyClicks, faults: list[Fault],
                outage_seconds: float, settle_seconds: float, recovery_timeout: float, progress, load: str,
                out_dir: Path) -> tuple[list[Row], set[str]]:
    """Warm up, then each fault in turn: inject, measure recovery, settle."""
    ctx = Context(settings, stack, fleet, clicks, outage_seconds)
    rows = [Row("warm-up", "jobs starting", None)]
    progress(f"load: {load}; jobs {', '.join(fleet.members)} starting (logs in {out_dir / 'logs'})")
    time.sleep(settle_seconds)  # so the warm-up marker stands behind real load, not an empty topic
    rows[0].recovery_s = checks.wait_caught_up(spark, settings, checks.caught_up_marker(settings), 600)
    if rows[0].recovery_s is None:
        raise LakehouseError(f"the pipeline did not catch up within 600s of starting; see {out_dir / 'logs'}")
    progress(f"warm-up: caught up after {rows[0].recovery_s:.0f}s")
    for fault in faults:
        crashes = sum(fleet.crashes().values())
        row = Row(fault.title, "", None, began_ms=int(time.time() * 1000))
        row.note = fault.inject(ctx)
        row.recovery_s = checks.wait_caught_up(spark, settings, checks.caught_up_marker(settings), recovery_timeout)
        time.sleep(settle_seconds)
        row.crashes = sum(fleet.crashes().values()) - crashes
        rows.append(row)
        shown = f"{row.recovery_s:.1f}s" if row.recovery_s is not None else f"NOT within {recovery_timeout:.0f}s"
        progress(f"{fault.title}: {row.note}; caught up {shown}; crashes {row.crashes}")
    return rows, ctx.skewed_event_ids


def _verify(spark, s: Settings, rows: list[Row], clicks: SteadyClicks, skewed: set[str], timeout: float,
            progress) -> ChaosReport:
    """Drain, then compare every table with the ground truth and attribute misses to the fault windows."""
    report = ChaosReport(rows)
    progress("load stopped; waiting for the pipeline to drain")
    if checks.wait_caught_up(spark, s, checks.caught_up_marker(s), timeout) is None:
        report.failures.append(f"the pipeline did not drain within {timeout:.0f}s after the load stopped")
    try:
        wait_until_equal(spark, s, timeout)
        report.dims_equal = True
    except AssertionError:
        report.dims_differences = {t: len(d) for t, d in differences(source_rows(s), lake_rows(spark, s)).items()}
        report.failures.append(f"Iceberg dimensions differ from MariaDB: {report.dims_differences} rows")
    deadline = time.monotonic() + timeout
    while (gaps := checks.aggregate_gaps(spark, s)) and time.monotonic() < deadline:
        time.sleep(3)
    report.aggregate_gaps = gaps
    if gaps:
        report.failures.append(f"live aggregates differ from the click table for {len(gaps)} products")

    counts = checks.click_id_counts(spark, s)
    expected = {i: t for i, t in clicks.acked.items() if i not in skewed}
    report.acknowledged, report.committed = len(expected), sum(counts.values())
    report.unacknowledged_landed = len(set(counts) - set(clicks.acked))
    starts = [r.began_ms for r in rows[1:]]
    for event_id, at_ms in expected.items():
        n = counts.get(event_id, 0)
        if n != 1:
            row = rows[sum(1 for b in starts if b <= at_ms)]
            row.lost += n == 0
            row.duplicated += max(0, n - 1)
    report.skewed = len(skewed)
    dead_ids = checks.dead_letter_event_ids(spark, s)
    report.skewed_dead_lettered = sum(1 for i in skewed if i in dead_ids and i not in counts)
    if report.skewed_dead_lettered != report.skewed:
        report.failures.append(f"{report.skewed - report.skewed_dead_lettered} of {report.skewed} events with a "
                               f"skewed clock were not dead-lettered")
    for row in rows:
        if row.recovery_s is None:
            report.failures.append(f"{row.fault}: did not catch up within {timeout:.0f}s")
        if row.lost or row.duplicated:
            report.failures.append(f"{row.fault}: {row.lost} events lost, {row.duplicated} duplicated")
        if "NO disk message" in row.note:
            report.failures.append(f"{row.fault}: the click pipeline did not say the disk was nearly full")
    return report
