"""The deployment's CPU requests scaled to the one-node cluster: a filter of rendered manifests.

The manifests ask for what a kind node of 6 CPU and 12 GiB holds (deploy/k8s/budget.py). This
node has the machine's two cores and its memory (24 GiB here), and its control plane runs as
processes that request nothing. So memory stays as the manifests say, and every CPU request —
containers of Deployments, StatefulSets and Jobs, Spark drivers' and executors' ``coreRequest``
— is multiplied by one factor, so that the busiest moment (the nightly batch beside everything,
as the budget counts it) fits ``NODE_CPU`` with the operators' own requests. Limits stay: a pod
may still use a whole core when the node has one free. Admitted is not scheduled: without this
the pods beyond two cores' worth of requests would stay Pending.

`kubectl kustomize OVERLAY | python -m deploy.node.sizing | kubectl apply -f -` (up.sh does).
"""

from __future__ import annotations

import os
import sys

import yaml

from deploy.k8s import budget
from deploy.node.configs import EVICTION_HARD

NODE_CPU = 2.0
HEADROOM_CPU = 0.1


def node_memory() -> int:
    """The memory the kubelet reports as the node's capacity: the machine's (24 GiB here)."""
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


#: the one-node cluster as the budget sees it: its control plane and CoreDNS are processes (no pods), Strimzi's
#: operator is replaced by the Kafka stand-in, spark-operator runs with up.sh's requests
NODE = budget.Platform(
    f"the one-node cluster ({NODE_CPU:g} CPU, this machine's memory), CPU requests scaled",
    (NODE_CPU, node_memory()),
    {},
    (0.0, budget.memory(EVICTION_HARD["memory.available"])),
    {name: need for name, need in budget.OPERATORS.items() if name.startswith("spark-operator")},
)
#: what the operators on the node request, taken off before the rest is scaled
OPERATORS_CPU = sum(c for c, _ in NODE.operators.values())


def workload_cpu(docs: list[dict]) -> float:
    """The CPU the manifests request at the busiest moment (kube-system and operators left out)."""
    return sum(r.cpu for r in budget.requests(docs) if r.owner.split("/")[0] not in ("kube-system", "kubelet", "operator"))


def factor(docs: list[dict]) -> float:
    wanted = workload_cpu(docs)
    room = NODE_CPU - OPERATORS_CPU - HEADROOM_CPU
    return 1.0 if wanted <= room else room / wanted


def _millicores(value: float) -> str:
    return f"{max(1, int(value * 1000))}m"


def scale(docs: list[dict], by: float) -> list[dict]:
    """The same documents with every CPU request multiplied by ``by``."""
    for doc in docs:
        kind, spec = doc.get("kind"), doc.get("spec", {})
        if kind in ("Deployment", "StatefulSet", "Job"):
            pod = spec["template"]["spec"]
            for container in (pod.get("containers") or []) + (pod.get("initContainers") or []):
                requests = container.get("resources", {}).get("requests", {})
                if "cpu" in requests:
                    requests["cpu"] = _millicores(budget.cpu(requests["cpu"]) * by)
        elif kind in ("SparkApplication", "ScheduledSparkApplication"):
            app = spec["template"] if kind == "ScheduledSparkApplication" else spec
            for role in (app["driver"], app["executor"]):
                role["coreRequest"] = _millicores(budget.cpu(role.get("coreRequest", role.get("cores", 1))) * by)
    return docs


def main() -> int:
    docs = [doc for doc in yaml.safe_load_all(sys.stdin) if doc]
    by = factor(docs)
    print(
        f"sizing: the manifests request {workload_cpu(docs):.2f} CPU at the busiest moment; "
        f"the node has {NODE_CPU:g}: CPU requests x {by:.2f}",
        file=sys.stderr,
    )
    yaml.safe_dump_all(scale(docs, by), sys.stdout, sort_keys=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
