"""The end-to-end check under faults: kill the pipeline's pods under load, then Trino must count exactly.

``make faults`` (kind) and ``make faults-node`` (the one-node cluster) run it on a deployment
``make up`` left running: a bounded load through the cluster's Locust and, while it runs, a
force-deleted executor pod (its containers killed at once, no grace) and then a force-deleted
driver pod. Spark asks for a new executor; spark-operator restarts the application
(``restartPolicy: Always``) and the click job resumes from the offsets committed in the click
table's snapshots. The check passes only when the job is back at its executor count and the
click table gained exactly the delivered events — fewer is a loss, more a duplicate.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from deploy.k8s.end_to_end import CheckFailed, Cluster, Kubectl, Limits, wait_for_table, wait_until_counted

APPLICATION = "pipeline"
#: the pod labels the SparkApplication gives its driver and its executors (k8s/base/spark/pipeline-application.yaml)
DRIVER_LABEL = "app.kubernetes.io/name=pipeline"
EXECUTOR_LABEL = "app.kubernetes.io/name=pipeline-executor"


@dataclass(frozen=True)
class Plan:
    """When each pod dies, counted from the start of the load, and how long recovery may take."""

    executor_at_s: float = 20.0
    driver_at_s: float = 60.0
    recovery_s: float = 420.0
    """until the killed pod's replacement runs (a driver restart is a new JVM and new executors)"""
    settle_s: float = 30.0
    """after the count is reached: a later commit that added rows again would show as a duplicate"""


@dataclass
class Timeline:
    """What happened, in seconds from the start of the load."""

    events: list[tuple[float, str]] = field(default_factory=list)

    def add(self, at: float, what: str) -> None:
        self.events.append((at, what))
        print(f"  {at:6.1f} s  {what}", file=sys.stderr, flush=True)


def exact(before: int, after: int, delivered: int) -> str:
    """The verdict on the click table's growth: exactly the delivered events, or what is wrong."""
    gained = after - before
    if gained == delivered:
        return ""
    if gained < delivered:
        return f"the click table gained {gained:,} rows for {delivered:,} delivered events: {delivered - gained:,} lost"
    return f"the click table gained {gained:,} rows for {delivered:,} delivered events: {gained - delivered:,} duplicated"


class Pods:
    """``kubectl`` on the pipeline's pods and its SparkApplication."""

    def __init__(self, context: str, namespace: str):
        self._kubectl = Kubectl(context, namespace)

    def running(self, selector: str) -> dict[str, str]:
        """The pods with ``selector`` that run and are not being deleted: uid -> name (a restarted driver
        keeps its name, not its uid)."""
        items = json.loads(self._kubectl("get", "pods", "-l", selector, "-o", "json"))["items"]
        return {
            pod["metadata"]["uid"]: pod["metadata"]["name"]
            for pod in items
            if pod["status"].get("phase") == "Running" and not pod["metadata"].get("deletionTimestamp")
        }

    def kill(self, name: str) -> None:
        """Force-delete: the kubelet kills the pod's containers at once, as a lost node or an OOM kill would."""
        self._kubectl("delete", "pod", name, "--grace-period=0", "--force", "--wait=false")

    def executors_wanted(self) -> int:
        return int(self._kubectl("get", "sparkapplication", APPLICATION, "-o", "jsonpath={.spec.executor.instances}")
                   or 1)

    def state(self) -> str:
        return self._kubectl("get", "sparkapplication", APPLICATION, "-o",
                             "jsonpath={.status.applicationState.state}").strip()


def wait_for(what: str, ready: Callable[[], bool], limit_s: float, sleep=time.sleep, clock=time.monotonic) -> float:
    """Seconds until ``ready()``; a kubectl failure on the way is retried, the limit is a failure."""
    began, last = clock(), ""
    while clock() - began < limit_s:
        try:
            if ready():
                return clock() - began
        except CheckFailed as exc:
            last = f" (last: {exc})"
        sleep(2)
    raise CheckFailed(f"{what}: not within {limit_s:.0f} s{last} (kubectl -n lakehouse get pods,sparkapplications)")


def settled_count(count: Callable[[], int], limits: Limits, sleep=time.sleep, clock=time.monotonic) -> int:
    """The click table's count once two counts ``2 x interval_s`` apart agree: rows of an earlier load still
    arriving would otherwise count as this load's (a false duplicate, or a loss of their size unseen)."""
    began, last = clock(), None
    while clock() - began < limits.table_wait_s:
        try:
            now = count()
        except CheckFailed:
            now = None
        if now is not None and now == last:
            return now
        last = now
        sleep(2 * limits.interval_s)
    raise CheckFailed(f"the click table's count did not settle within {limits.table_wait_s:.0f} s (last {last}): "
                      "is a load still running? (kubectl -n lakehouse logs deploy/locust-master)")


def run(cluster: Cluster, pods: Pods, rate: float, duration: str, plan: Plan = Plan(),
        limits: Limits = Limits(count_wait_s=600)) -> str:
    wanted = pods.executors_wanted()
    wait_for(f"the {APPLICATION} application running with {wanted} executors",
             lambda: pods.state() == "RUNNING" and len(pods.running(EXECUTOR_LABEL)) >= wanted, plan.recovery_s)
    wait_for_table(cluster.count, limits)
    before = settled_count(cluster.count, limits)
    timeline, delivered, failed = Timeline(), [], []

    def load_once() -> None:
        try:
            delivered.append(cluster.load(rate, duration))
        except CheckFailed as exc:
            failed.append(exc)

    load = threading.Thread(target=load_once, daemon=True)
    began = time.monotonic()
    load.start()
    timeline.add(0, f"load started: {rate:g} events/s for {duration}; {wanted} executors; click table at {before:,}")

    def kill_at(at_s: float, selector: str, what: str) -> set[str]:
        """Kill one running pod of ``selector`` at ``at_s`` into the load; the uids running before the kill."""
        time.sleep(max(0.0, at_s - (time.monotonic() - began)))
        if not load.is_alive():  # a kill after the load proves nothing about recovering under it
            raise CheckFailed(f"the load ended before the {what} pod was killed: give it a longer --duration")
        running = pods.running(selector)
        if not running:
            raise CheckFailed(f"no running {what} to kill")
        name = sorted(running.values())[0]
        pods.kill(name)
        timeline.add(time.monotonic() - began, f"killed {what} pod {name}")
        return set(running)

    def new(selector: str, old: set[str]) -> int:
        return len(set(pods.running(selector)) - old)

    old = kill_at(plan.executor_at_s, EXECUTOR_LABEL, "executor")
    took = wait_for("a new executor", lambda: new(EXECUTOR_LABEL, old) >= 1 and len(pods.running(EXECUTOR_LABEL))
                    >= wanted, plan.recovery_s)
    timeline.add(time.monotonic() - began, f"{wanted} executors run again ({took:.0f} s after the kill)")

    old_executors = set(pods.running(EXECUTOR_LABEL))
    old_driver = kill_at(plan.driver_at_s, DRIVER_LABEL, "driver")
    took = wait_for("the application restarted with new executors",
                    lambda: pods.state() == "RUNNING" and new(DRIVER_LABEL, old_driver) >= 1
                    and new(EXECUTOR_LABEL, old_executors) >= wanted, plan.recovery_s)
    timeline.add(time.monotonic() - began, f"a new driver and {wanted} new executors run ({took:.0f} s after the kill)")

    load.join()
    if failed:
        raise failed[0]
    if not delivered or delivered[0] <= 0:
        raise CheckFailed("Locust delivered no events (kubectl -n lakehouse logs deploy/locust-master)")
    timeline.add(time.monotonic() - began, f"load ended: {delivered[0]:,} events delivered")
    caught_up = wait_until_counted(cluster.count, before, delivered[0], limits)
    timeline.add(time.monotonic() - began, f"every delivered event counted ({caught_up:.0f} s after the load)")
    time.sleep(plan.settle_s)
    wrong = exact(before, cluster.count(), delivered[0])
    if wrong:
        raise CheckFailed(wrong)
    return (f"faults: an executor and the driver killed under load; the job recovered and Trino counted exactly "
            f"the {delivered[0]:,} delivered events ({caught_up:.0f} s after the load ended)")


def main() -> None:
    parser = argparse.ArgumentParser(
        description="Kill the pipeline's executor and driver pods under a bounded load; Trino must then count "
                    "exactly the delivered events (run on a deployment `make up` or `make up-node` left running).")
    parser.add_argument("--context", required=True, help="kubectl context (kind-lakehouse, or the node's name)")
    parser.add_argument("--namespace", default="lakehouse")
    parser.add_argument("--rate", type=float, default=200, help="events/s through the cluster's Locust")
    parser.add_argument("--duration", default="120s", help="how long the load runs (the kills fall inside it)")
    args = parser.parse_args()
    try:
        print(run(Cluster(args.context, args.namespace), Pods(args.context, args.namespace), args.rate, args.duration))
    except CheckFailed as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(1) from None


if __name__ == "__main__":
    main()
