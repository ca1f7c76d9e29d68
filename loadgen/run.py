"""Run Locust headless for `lakehouse load clicks`: command line, reports, achieved vs target rate."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from lakehouse.errors import LakehouseError
from loadgen.shapes.profiles import PROFILES

LOADGEN_DIR = Path(__file__).resolve().parent
SHAPES = tuple(PROFILES)
SUMMARY = "summary.json"


def parse_duration(text: str) -> float:
    """'90', '90s', '2m', '1h30m' -> seconds (Locust's --run-time forms)."""
    total, number = 0.0, ""
    for ch in text.strip():
        if ch.isdigit() or ch == ".":
            number += ch
        elif ch in "hms" and number:
            total += float(number) * {"h": 3600, "m": 60, "s": 1}[ch]
            number = ""
        else:
            raise ValueError(f"cannot read duration {text!r}: use forms like 60, 60s, 2m, 1h30m")
    return total + (float(number) if number else 0.0)


def expected_events(shape: str, rate: float, duration: float, steps: int = 1000) -> float:
    """Events the shape asks for over the run (integral of its rate)."""
    if shape not in SHAPES:
        raise ValueError(f"unknown shape {shape!r}; shapes: {', '.join(SHAPES)}")
    profile = PROFILES[shape]
    dt = duration / steps
    return sum(profile((i + 0.5) * dt, rate, duration) * dt for i in range(steps))


@dataclass
class LoadResult:
    target_events: float
    delivered: int
    failed: int
    duration: float
    produce_p50_ms: float
    produce_p99_ms: float
    report_dir: Path

    @property
    def achieved_rate(self) -> float:
        return self.delivered / self.duration if self.duration else 0.0

    @property
    def reached(self) -> bool:
        return self.delivered >= 0.95 * self.target_events


def command(rate: float, duration: float, shape: str, bad_share: float, users: int, workers: int,
            db_change_rate: float, out: Path, new_fields: tuple[str, ...] = (), rollout: str = "100%",
            keys: str = "") -> list[str]:
    files = [str(LOADGEN_DIR / "locustfile.py"), str(LOADGEN_DIR / "shapes" / f"{shape}.py")]
    cmd = [sys.executable, "-m", "locust", "-f", ",".join(files), "--headless", "-u", str(users), "-r", str(users),
           "--run-time", f"{int(duration)}s", "--stop-timeout", "10", "--event-rate", str(rate),
           "--bad-share", str(bad_share), "--db-change-rate", str(db_change_rate),
           "--csv", str(out / "locust"), "--summary-file", str(out / SUMMARY), "--html", str(out / "report.html"),
           "--only-summary", "--loglevel", "WARNING"]
    for field in new_fields:
        cmd += ["--new-field", field]
    if new_fields:
        cmd += ["--rollout", rollout]
    if keys:
        cmd += ["--keys", keys]
    if workers > 1:
        cmd += ["--processes", str(workers)]
    return cmd


def read_summary(out: Path) -> dict[str, dict]:
    """The run's final counts per kind of request (written by the locustfile at exit)."""
    return json.loads((out / SUMMARY).read_text())


def read_result(out: Path, target_events: float, duration: float) -> LoadResult:
    """Totals over every Kafka kind; produce latency of the valid clicks."""
    kinds = read_summary(out)
    kafka = [k for k in kinds.values() if k["type"] == "kafka"]
    click = kinds.get("click", {})
    return LoadResult(target_events, sum(k["delivered"] for k in kafka), sum(k["failed"] for k in kafka), duration,
                      float(click.get("p50_ms") or 0), float(click.get("p99_ms") or 0), out)


def run(rate: float, duration: float, shape: str, bad_share: float, users: int, workers: int,
        db_change_rate: float, out: Path, topic: str | None = None, new_fields: tuple[str, ...] = (),
        rollout: str = "100%", keys: str = "") -> LoadResult:
    """Run Locust; ``topic`` sends the events somewhere other than the pipeline's click topic."""
    out.mkdir(parents=True, exist_ok=True)
    target = expected_events(shape, rate, duration)
    env = {**os.environ, **({"LAKEHOUSE_KAFKA__CLICKS_TOPIC": topic} if topic else {})}
    proc = subprocess.run(command(rate, duration, shape, bad_share, users, workers, db_change_rate, out,
                                  new_fields, rollout, keys),
                          capture_output=True, text=True, env=env)
    (out / "locust.log").write_text(proc.stdout + proc.stderr)
    if not (out / SUMMARY).exists():
        raise LakehouseError(f"locust wrote no statistics (exit {proc.returncode}); see {out / 'locust.log'}:\n"
                           + (proc.stderr or proc.stdout)[-1500:])
    return read_result(out, target, duration)
