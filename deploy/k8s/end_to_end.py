"""`make up`'s last step: a bounded load through the cluster's Locust, then Trino must count every event.

Run by deploy/k8s/up.sh as ``python -m deploy.k8s.end_to_end --context kind-X --namespace N``.
Every wait is bounded and every failure is one: a count Trino cannot give is retried a few
times and then fails the step (it never reads as success), the click table is waited for
until it exists (it appears with the driver's first batch), and the delivered figure is how
far the click topic's end offsets moved (``loadgen.swarm``), not Locust's own count. The
Trino CLI runs in the coordinator's container with a small heap, so the check's JVMs cannot
starve the server beside them of memory.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

from lakehouse.errors import LakehouseError

COUNT_SQL = "SELECT count(*) FROM iceberg.ods_behavior.clickevent"
#: the Trino CLI's heap inside the coordinator's container (the server there runs at -Xmx768M of 1536Mi)
CLI_HEAP = "-Xmx96m"


class CheckFailed(LakehouseError):
    """The end-to-end check did not pass; the message says what was seen and where to look."""


@dataclass(frozen=True)
class Limits:
    table_wait_s: float = 300.0  # until the click table exists
    count_wait_s: float = 300.0  # until every delivered event is counted
    interval_s: float = 5.0
    failures_in_a_row: int = 3  # counts that fail in a row (Trino or the table gone) end the check


def wait_for_table(count: Callable[[], int], limits: Limits, sleep=time.sleep, clock=time.monotonic) -> int:
    """The first count that succeeds: the click table exists once the driver committed its first batch."""
    began, last_error = clock(), ""
    while clock() - began < limits.table_wait_s:
        try:
            return count()
        except CheckFailed as exc:
            last_error = str(exc)
        sleep(limits.interval_s)
    raise CheckFailed(f"Trino could not count the click table for {limits.table_wait_s:.0f} s (last: {last_error}); "
                      "does the pipeline's driver run? (kubectl -n lakehouse logs -l spark-role=driver)")


def wait_until_counted(count: Callable[[], int], before: int, delivered: int, limits: Limits,
                       sleep=time.sleep, clock=time.monotonic) -> float:
    """Seconds until Trino counts ``delivered`` more rows than ``before``; a failed count is retried, never taken
    for success, and ``failures_in_a_row`` of them end the check."""
    began, failures, seen = clock(), 0, before
    while True:
        try:
            seen, failures = count(), 0
        except CheckFailed as exc:
            failures += 1
            if failures >= limits.failures_in_a_row:
                raise CheckFailed(f"Trino failed to count the click table {failures} times in a row: {exc}") from exc
        if seen - before >= delivered:
            return clock() - began
        if clock() - began > limits.count_wait_s:
            raise CheckFailed(f"Trino counts {seen - before} of the {delivered} delivered events "
                              f"{limits.count_wait_s:.0f} s after the load (kubectl -n lakehouse logs -l spark-role=driver)")
        sleep(limits.interval_s)


def parse_delivered(output: str) -> int:
    """The delivered figure ``loadgen.swarm`` prints (``delivered 1,234 events ...``)."""
    match = re.search(r"^delivered ([0-9,]+) events", output, re.M)
    if not match:
        raise CheckFailed(f"the load printed no delivered figure:\n{output[-1000:]}")
    return int(match.group(1).replace(",", ""))


class Kubectl:
    """``kubectl`` in one context and namespace: its output, or a CheckFailed saying what was asked and why not."""

    def __init__(self, context: str, namespace: str):
        self.base = ["kubectl", "--context", context, "-n", namespace]

    def __call__(self, *args: str, timeout: float = 60, what: str = "") -> str:
        what = what or f"kubectl {' '.join(args[:3])}"
        try:
            done = subprocess.run([*self.base, *args], capture_output=True, text=True, timeout=timeout, check=False)
        except subprocess.TimeoutExpired:
            raise CheckFailed(f"{what} did not answer in {timeout:.0f} s") from None
        if done.returncode != 0:
            raise CheckFailed(f"{what} exited {done.returncode}: {done.stderr.strip()[-400:]}")
        return done.stdout


class Cluster:
    """``kubectl exec`` into the namespace's deployments."""

    def __init__(self, context: str, namespace: str):
        self.kubectl = Kubectl(context, namespace)

    def exec(self, deployment: str, *command: str, timeout: float = 120) -> str:
        return self.kubectl("exec", f"deploy/{deployment}", "--", *command, timeout=timeout,
                            what=f"{deployment}: {' '.join(command[:3])}...")

    @staticmethod
    def count_command() -> list[str]:
        """The Trino CLI in the coordinator's container, its JVM capped so the server beside it keeps its memory."""
        return ["env", f"JAVA_TOOL_OPTIONS={CLI_HEAP}", "trino", "--output-format", "TSV", "--execute", COUNT_SQL]

    def count(self) -> int:
        out = self.exec("trino-coordinator", *self.count_command(), timeout=60).strip()
        if not out.isdigit():
            raise CheckFailed(f"Trino answered {out[:200]!r} instead of a count")
        return int(out)

    def load(self, rate: float, duration: str) -> int:
        out = self.exec("locust-master", "python", "-m", "loadgen.swarm", "--rate", str(rate), "--duration",
                        duration, "--bad-share", "0", timeout=600)
        sys.stderr.write(out)
        return parse_delivered(out)


def run(cluster: Cluster, rate: float, duration: str, limits: Limits = Limits()) -> str:
    before = wait_for_table(cluster.count, limits)
    delivered = cluster.load(rate, duration)
    if delivered <= 0:
        raise CheckFailed("Locust delivered no events (kubectl -n lakehouse logs deploy/locust-master)")
    took = wait_until_counted(cluster.count, before, delivered, limits)
    return f"end to end: Trino counted all {delivered:,} delivered events {took:.0f} s after the load ended"


def main() -> None:
    parser = argparse.ArgumentParser(description="make up's end-to-end check (bounded load, then Trino counts).")
    parser.add_argument("--context", required=True)
    parser.add_argument("--namespace", required=True)
    parser.add_argument("--rate", type=float, default=200)
    parser.add_argument("--duration", default="30s")
    args = parser.parse_args()
    try:
        print(run(Cluster(args.context, args.namespace), args.rate, args.duration))
    except CheckFailed as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(1) from None


if __name__ == "__main__":
    main()
