"""Every fault the chaos suite can inject, one bounded action each.

A fault runs until it is over (a process killed and restarted by the supervisor, a
service back up, the disk freed) and may return a note for the table. Keys name them on
the command line: ``kill:pipeline``, ``restart:kafka``, ``crash:kafka``, ``outage:s3``, ``disk-full``,
``clock``.
"""

from __future__ import annotations

import logging
import os
import random
import shutil
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from deploy.local.stack import LocalStack
from lab.chaos.fleet import JOBS, Fleet
from lab.chaos.steady import SteadyClicks
from lakehouse.settings import Settings
from loadgen.events import click_event

log = logging.getLogger(__name__)

DAY_MS = 86_400_000


@dataclass
class Context:
    """What a fault may touch."""

    settings: Settings
    stack: LocalStack
    fleet: Fleet
    clicks: SteadyClicks
    outage_seconds: float = 30.0
    skewed_event_ids: set[str] = field(default_factory=set)  # far-future/past events: must be dead-lettered


@dataclass(frozen=True)
class Fault:
    key: str
    title: str
    inject: Callable[[Context], str]


def _kill(job: str) -> Fault:
    def inject(ctx: Context) -> str:
        ctx.fleet.kill(job)
        return "restarted by the supervisor"
    return Fault(f"kill:{job}", f"kill -9 {job}", inject)


def _restart(service: str) -> Fault:
    def inject(ctx: Context) -> str:
        took = ctx.stack.restart(service)
        return f"{service} back in {took:.1f}s"
    return Fault(f"restart:{service}", f"restart {service}", inject)


def _crash(service: str) -> Fault:
    def inject(ctx: Context) -> str:
        ctx.stack.crash_service(service)
        took = ctx.stack.start_service(service)
        return f"kill -9, {service} back in {took:.1f}s"
    return Fault(f"crash:{service}", f"kill -9 {service}, restart", inject)


def _outage(service: str) -> Fault:
    def inject(ctx: Context) -> str:
        ctx.stack.stop_service(service)
        time.sleep(ctx.outage_seconds)
        ctx.stack.start_service(service)
        return f"down {ctx.outage_seconds:.0f}s"
    return Fault(f"outage:{service}", f"{service} unavailable", inject)


def _disk_full(ctx: Context) -> str:
    """Fill the run directory's disk to below the writers' floor, hold, free it again.

    Only safe on a disk of the suite's own (a bounded tmpfs): on a shared disk the
    ballast would have to fill the machine's disk, so the fault is refused there.
    """
    run_dir = ctx.settings.run_dir
    if not is_private_mount(run_dir):
        return "skipped: the run directory is not on a disk of its own (run as root to get a tmpfs)"
    floor_mb = ctx.settings.pipeline.min_free_disk_mb
    ballast = run_dir / f"ballast-{uuid.uuid4().hex[:6]}"
    free_mb = shutil.disk_usage(run_dir).free / 2**20
    size = int(max(0.0, free_mb - floor_mb / 2) * 2**20)  # leave half the floor: writers stop, services live
    pipeline_log = ctx.fleet.members["pipeline"].log_path
    seen_before = pipeline_log.read_text(errors="replace").count("pipeline.min_free_disk_mb")
    try:
        with ballast.open("wb") as fh:
            os.posix_fallocate(fh.fileno(), 0, size)
        time.sleep(ctx.outage_seconds)
    finally:
        ballast.unlink(missing_ok=True)
    said = pipeline_log.read_text(errors="replace").count("pipeline.min_free_disk_mb") > seen_before
    return f"{size / 2**20:,.0f} MiB ballast; " + ("writers paused with a clear message" if said
                                                    else "NO disk message from the click pipeline")


def _clock(ctx: Context) -> str:
    """Events stamped a month ahead and a month behind: the validator dead-letters them (docs/chaos.md, the `clock` fault)."""
    now = int(time.time() * 1000)
    rng = random.Random(17)
    for skew in (30 * DAY_MS, -30 * DAY_MS) * 25:
        event = click_event(rng, now_ms=now + skew)
        ctx.skewed_event_ids.add(event["eventId"])
        ctx.clicks.send(event)
    time.sleep(ctx.outage_seconds / 3)
    return f"{len(ctx.skewed_event_ids)} events +/-30 days"


def is_private_mount(path: Path) -> bool:
    """True when ``path`` is the root of a mount of its own (the suite's tmpfs)."""
    return os.path.ismount(path)


def catalog() -> dict[str, Fault]:
    faults = [_kill(job) for job in JOBS]
    faults += [_restart(service) for service in ("kafka", "s3", "metastore", "postgres", "mariadb")]
    faults += [_crash("kafka"), _outage("s3"), _outage("metastore")]
    faults += [Fault("disk-full", "disk nearly full", _disk_full), Fault("clock", "event clock +/-30 days", _clock)]
    return {f.key: f for f in faults}


# The CI-sized subset: one of each kind of fault, the ones most likely to break exactly-once. A kill -9 of
# the pipeline application is not in it: tests/pipeline/clicks/test_click_faults.py kills the click job twice at random
# moments under load and checks every event once, and here it cost two minutes of CI (a Spark restart on a
# busy 2-core machine); kill:cdc stands for the supervisor restarting a killed job.
CI_SUBSET = ("kill:cdc", "restart:kafka", "crash:kafka", "outage:s3", "outage:metastore", "disk-full", "clock")
