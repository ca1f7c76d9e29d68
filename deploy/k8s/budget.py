"""What the deployment asks the scheduler for: the sum of every pod's requests, Spark's included.

A kind node is one laptop. The whole system, operators included, must fit a node of
``NODE_BUDGET`` (6 CPU / 12 GiB) or pods stay Pending; no schema check sees that. Counted
here from the rendered manifests:

- Deployments, StatefulSets and Jobs: replicas x the containers' requests (an init
  container counts when it asks for more than the containers together);
- Strimzi: the node pools' brokers and the entity operator's containers;
- SparkApplications and the ScheduledSparkApplication (it runs beside the rest at night):
  the driver and each executor, as Spark sizes their pods: ``coreRequest`` (else ``cores``)
  CPU, and ``memory`` plus ``memoryOverhead`` (else Spark's default for a Python app,
  40 % of the memory, at least 384 MiB);
- the operators themselves, from the requests `make up` sets on their charts (``OPERATORS``);
- what the node runs before any of ours: kind's kube-system pods (``KUBE_SYSTEM``, the requests
  of kind v0.27's control plane, CoreDNS and kindnet) and the memory the kubelet keeps back from
  allocatable (``KUBELET_RESERVED``: the default hard-eviction threshold, since kind sets no
  system- or kube-reserved).

All of it at once is the busiest time of day: the nightly batch's ScheduledSparkApplication
runs while everything else keeps running. A :class:`Platform` holds what differs between the
nodes the deployment runs on: ``KIND`` here, the one-node cluster's in deploy/node/sizing.py.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MI = 1024 * 1024
#: the kind node the whole deployment must fit (issue 29): CPU cores, bytes
NODE_BUDGET = (6.0, 12 * 1024 * MI)
#: what up.sh's helm flags request for the operators' own pods (CPU cores, bytes)
OPERATORS = {"strimzi-cluster-operator": (0.1, 384 * MI), "spark-operator-controller": (0.05, 128 * MI),
             "spark-operator-webhook": (0.05, 64 * MI)}
#: kube-system's requests on a kind node (kind v0.27.0, Kubernetes 1.32): CPU cores, bytes
KUBE_SYSTEM = {"kube-apiserver": (0.25, 0), "kube-controller-manager": (0.2, 0), "kube-scheduler": (0.1, 0),
               "etcd": (0.1, 100 * MI), "coredns x2": (0.2, 2 * 70 * MI), "kindnet": (0.1, 50 * MI)}
#: memory the kubelet withholds from allocatable: evictionHard memory.available (default 100Mi)
KUBELET_RESERVED = (0.0, 100 * MI)
#: Spark on Kubernetes: memory overhead of a non-JVM (Python) application's pods, and its floor
PYTHON_OVERHEAD_FACTOR, OVERHEAD_FLOOR = 0.4, 384 * MI



@dataclass(frozen=True)
class Platform:
    """A node the deployment must fit, and what it runs before any of the deployment's pods."""

    name: str
    capacity: tuple[float, int]  # CPU cores, bytes
    system: dict[str, tuple[float, int]]  # the node's own pods (a control plane run as processes asks for nothing)
    reserved: tuple[float, int]  # what the kubelet keeps back from allocatable
    operators: dict[str, tuple[float, int]]


KIND = Platform(f"a kind node of {NODE_BUDGET[0]:g} CPU / {NODE_BUDGET[1] / 2**30:g} GiB", NODE_BUDGET, KUBE_SYSTEM,
                KUBELET_RESERVED, OPERATORS)

_UNITS = {"": 1, "k": 1000, "m": 1000**2, "g": 1000**3, "ki": 1024, "mi": MI, "gi": 1024 * MI}


def cpu(value) -> float:
    text = str(value)
    return float(text[:-1]) / 1000 if text.endswith("m") else float(text)


def memory(value) -> int:
    """Kubernetes quantities (``512Mi``, ``1Gi``) and Spark's sizes (``1g``, ``768m``, binary as in the JVM)."""
    match = re.fullmatch(r"([0-9.]+)\s*([a-zA-Z]*)", str(value).strip())
    if not match:
        raise ValueError(f"not a memory size: {value!r}")
    number, unit = float(match.group(1)), match.group(2).lower()
    if unit in ("g", "m", "k") and not str(value).strip()[-1].isupper():  # Spark's lower-case units are binary
        unit += "i"
    return int(number * _UNITS[unit.rstrip("b")])


@dataclass(frozen=True)
class Request:
    owner: str  # kind/name
    cpu: float
    memory: int


def _containers(spec: dict) -> tuple[float, int]:
    def total(containers) -> tuple[float, int]:
        requests = [c.get("resources", {}).get("requests", {}) for c in containers or []]
        return sum(cpu(r.get("cpu", 0)) for r in requests), sum(memory(r.get("memory", 0)) for r in requests)

    main, init = total(spec.get("containers")), [total([c]) for c in spec.get("initContainers") or []]
    return max([main[0], *(i[0] for i in init)]), max([main[1], *(i[1] for i in init)])


def _spark_pod(role: dict) -> tuple[float, int]:
    mem = memory(role["memory"])
    overhead = memory(role["memoryOverhead"]) if "memoryOverhead" in role else \
        max(OVERHEAD_FLOOR, int(PYTHON_OVERHEAD_FACTOR * mem))
    return cpu(role.get("coreRequest", role.get("cores", 1))), mem + overhead


def requests(docs: list[dict], platform: Platform = KIND) -> list[Request]:
    out = [Request(f"kube-system/{name}", c, m) for name, (c, m) in platform.system.items()]
    out.append(Request("kubelet/eviction-reserve", *platform.reserved))
    out += [Request(f"operator/{name}", c, m) for name, (c, m) in platform.operators.items()]
    for doc in docs:
        kind, name, spec = doc["kind"], doc["metadata"]["name"], doc.get("spec", {})
        if kind in ("Deployment", "StatefulSet", "Job"):
            c, m = _containers(spec["template"]["spec"])
            replicas = spec.get("replicas", 1)
            out.append(Request(f"{kind}/{name}", c * replicas, m * replicas))
        elif kind == "KafkaNodePool":
            r = spec.get("resources", {}).get("requests", {})
            out.append(Request(f"{kind}/{name}", cpu(r.get("cpu", 0)) * spec["replicas"],
                               memory(r.get("memory", 0)) * spec["replicas"]))
        elif kind == "Kafka":
            for part, settings in spec.get("entityOperator", {}).items():
                r = settings.get("resources", {}).get("requests", {}) if isinstance(settings, dict) else {}
                if r:
                    out.append(Request(f"{kind}/{name}/{part}", cpu(r.get("cpu", 0)), memory(r.get("memory", 0))))
        elif kind in ("SparkApplication", "ScheduledSparkApplication"):
            app = spec["template"] if kind == "ScheduledSparkApplication" else spec
            driver, executor = _spark_pod(app["driver"]), _spark_pod(app["executor"])
            n = app["executor"].get("instances", 1)
            out.append(Request(f"{kind}/{name}", driver[0] + n * executor[0], driver[1] + n * executor[1]))
    return out


def total(docs: list[dict], platform: Platform = KIND) -> tuple[float, int]:
    found = requests(docs, platform)
    return sum(r.cpu for r in found), sum(r.memory for r in found)


def report(docs: list[dict], platform: Platform = KIND) -> str:
    """Every request and the sum against the platform's capacity (what ``pytest -s ... -k fits`` prints)."""
    cpu_total, memory_total = total(docs, platform)
    rows = "\n".join(f"  {r.owner}: {r.cpu:.2f} CPU, {r.memory / MI:,.0f} MiB" for r in requests(docs, platform))
    return (f"{platform.name}: requests {cpu_total:.2f} CPU, {memory_total / 2**30:.2f} GiB of "
            f"{platform.capacity[0]:g} CPU, {platform.capacity[1] / 2**30:.2f} GiB\n{rows}")
