"""What each pod of the node used against what it asked for: `python -m deploy.node usage`.

Read from the kubelet's cgroups (cgroup v1, the memory controller): the peak of each pod's
memory since it started (``memory.max_usage_in_bytes``, which counts the page cache the pod's
files occupy as well as its processes' memory) and its working set now (usage less inactive file
pages, what the kubelet's eviction counts), beside the pod's requests and limits from the API.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from deploy.k8s import budget
from deploy.node import cluster
from deploy.node.settings import NodeSettings

MEMORY = Path("/sys/fs/cgroup/memory")


@dataclass(frozen=True)
class PodUsage:
    pod: str
    peak_mib: float
    working_set_mib: float
    request_mib: float
    limit_mib: float | None


def _pod_cgroup(settings: NodeSettings, uid: str, qos: str) -> Path:
    """The pod's memory cgroup under the kubelet's cgroup root (the node's own)."""
    pods = MEMORY / settings.cgroup_root.strip("/") / "kubepods"
    tier = {"Guaranteed": pods, "Burstable": pods / "burstable"}.get(qos, pods / "besteffort")
    return tier / f"pod{uid}"


def pods_usage(settings: NodeSettings) -> list[PodUsage]:
    listed = cluster.kubectl(settings, "get", "pods", "-A", "-o", "json")
    rows = []
    for pod in json.loads(listed.stdout)["items"]:
        if pod["status"].get("phase") != "Running":
            continue
        folder = _pod_cgroup(settings, pod["metadata"]["uid"], pod["status"].get("qosClass", ""))
        if not folder.is_dir():
            continue
        stat = dict(line.split() for line in (folder / "memory.stat").read_text().splitlines())
        usage = int((folder / "memory.usage_in_bytes").read_text())
        requests = [c.get("resources", {}).get("requests", {}) for c in pod["spec"]["containers"]]
        limits = [c.get("resources", {}).get("limits", {}) for c in pod["spec"]["containers"]]
        limit = None if any("memory" not in lim for lim in limits) else sum(budget.memory(lim["memory"]) for lim in limits)
        rows.append(
            PodUsage(
                pod=f"{pod['metadata']['namespace']}/{pod['metadata']['name']}",
                peak_mib=int((folder / "memory.max_usage_in_bytes").read_text()) / 2**20,
                working_set_mib=max(0, usage - int(stat.get("total_inactive_file", 0))) / 2**20,
                request_mib=sum(budget.memory(r.get("memory", 0)) for r in requests) / 2**20,
                limit_mib=None if limit is None else limit / 2**20,
            )
        )
    return rows


def table(rows: list[PodUsage]) -> str:
    lines = ["| pod | peak (with page cache) | working set now | request | limit |", "|---|---:|---:|---:|---:|"]
    for row in sorted(rows, key=lambda r: -r.peak_mib):
        limit = "none" if row.limit_mib is None else f"{row.limit_mib:,.0f}"
        lines.append(f"| {row.pod} | {row.peak_mib:,.0f} | {row.working_set_mib:,.0f} | {row.request_mib:,.0f} | {limit} |")
    total_peak = sum(r.peak_mib for r in rows)
    total_now = sum(r.working_set_mib for r in rows)
    total_request = sum(r.request_mib for r in rows)
    lines.append(f"| **all pods** (MiB) | {total_peak:,.0f} | {total_now:,.0f} | {total_request:,.0f} | |")
    return "\n".join(lines)
