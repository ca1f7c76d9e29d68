"""Checks schemas cannot make: do the rendered resources fit together and match the code?

Each check returns readable problems ("Service/trino selects no pod: ..."), never raises,
so one run reports everything that is wrong.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Iterator
from typing import Any

from deploy.k8s.profile import APP_DIR, KAFKA_CLUSTER, settings_env
from lakehouse.settings import REPO_ROOT, Settings
from lakehouse.settings_env import declared_settings

Doc = dict[str, Any]
WORKLOADS = ("Deployment", "StatefulSet", "Job", "DaemonSet")
EXPORTER_LABEL = "lakehouse.io/exporter"


def _name(doc: Doc) -> str:
    return f"{doc['kind']}/{doc['metadata']['name']}"


def _spark_specs(doc: Doc) -> list[dict[str, Any]]:
    if doc["kind"] == "SparkApplication":
        return [doc["spec"]]
    if doc["kind"] == "ScheduledSparkApplication":
        return [doc["spec"]["template"]]
    return []


def pod_templates(docs: list[Doc]) -> Iterator[tuple[str, dict[str, str], dict[str, Any]]]:
    """(owner, pod labels, pod spec) for every pod the resources will create."""
    for doc in docs:
        if doc["kind"] in WORKLOADS:
            template = doc["spec"]["template"]
            yield _name(doc), template.get("metadata", {}).get("labels", {}), template["spec"]
        for spec in _spark_specs(doc):
            for role in ("driver", "executor"):
                part = spec[role]
                pod = {"containers": [{"name": role, "image": spec["image"], "envFrom": part.get("envFrom", [])}],
                       "volumes": spec.get("volumes", []), "serviceAccountName": part.get("serviceAccount")}
                yield f"{_name(doc)}[{role}]", {**part.get("labels", {}), "spark-role": role}, pod


def _selects(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


def service_selectors(docs: list[Doc]) -> list[str]:
    pods = list(pod_templates(docs))
    return [f"{_name(d)} selects no pod: {d['spec']['selector']}" for d in docs
            if d["kind"] == "Service" and d["spec"].get("selector")
            and not any(_selects(d["spec"]["selector"], labels) for _, labels, _ in pods)]


def strimzi_clusters(docs: list[Doc]) -> list[str]:
    kafkas = {d["metadata"]["name"] for d in docs if d["kind"] == "Kafka"}
    problems = []
    if KAFKA_CLUSTER not in kafkas:
        problems.append(f"no Kafka named {KAFKA_CLUSTER!r} (settings point clients at {KAFKA_CLUSTER}-kafka-bootstrap)")
    for d in docs:
        cluster = d["metadata"].get("labels", {}).get("strimzi.io/cluster")
        if d["kind"] in ("KafkaTopic", "KafkaNodePool", "KafkaUser") and cluster not in kafkas:
            problems.append(f"{_name(d)} names Kafka cluster {cluster!r}; defined: {sorted(kafkas)}")
    return problems


def exposure(docs: list[Doc]) -> list[str]:
    """Nothing is reachable from outside the cluster by default: users port-forward (k8s/README)."""
    problems = [f"{_name(d)} is of type {d['spec']['type']}: keep Services ClusterIP and reach them by "
                f"port-forward" for d in docs
                if d["kind"] == "Service" and d["spec"].get("type", "ClusterIP") != "ClusterIP"]
    for where, _, pod in pod_templates(docs):
        if pod.get("hostNetwork"):
            problems.append(f"{where} uses the host's network")
        for container in pod.get("containers", []) + pod.get("initContainers", []):
            for port in container.get("ports", []):
                if "hostPort" in port:
                    problems.append(f"{where}: container {container['name']} binds host port {port['hostPort']}")
    return problems


def _references(pod: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """(kind, name) of every ConfigMap, Secret, PVC and ServiceAccount a pod spec uses."""
    if pod.get("serviceAccountName"):
        yield "ServiceAccount", pod["serviceAccountName"]
    for volume in pod.get("volumes", []):
        if "configMap" in volume:
            yield "ConfigMap", volume["configMap"]["name"]
        if "secret" in volume:
            yield "Secret", volume["secret"]["secretName"]
        if "persistentVolumeClaim" in volume:
            yield "PersistentVolumeClaim", volume["persistentVolumeClaim"]["claimName"]
    for container in pod.get("initContainers", []) + pod.get("containers", []):
        for source in container.get("envFrom", []):
            if "configMapRef" in source:
                yield "ConfigMap", source["configMapRef"]["name"]
            if "secretRef" in source:
                yield "Secret", source["secretRef"]["name"]
        for env in container.get("env", []):
            ref = env.get("valueFrom", {})
            if "secretKeyRef" in ref:
                yield "Secret", ref["secretKeyRef"]["name"]
            if "configMapKeyRef" in ref:
                yield "ConfigMap", ref["configMapKeyRef"]["name"]


def dangling_references(docs: list[Doc]) -> list[str]:
    present = {(d["kind"], d["metadata"]["name"]) for d in docs}
    present.add(("ServiceAccount", "default"))
    claims = {t["metadata"]["name"] for d in docs if d["kind"] == "StatefulSet"
              for t in d["spec"].get("volumeClaimTemplates", [])}
    problems = []
    for owner, _, pod in pod_templates(docs):
        for kind, name in _references(pod):
            if (kind, name) not in present and not (kind == "PersistentVolumeClaim" and name in claims):
                problems.append(f"{owner} uses {kind} {name!r}, which no resource defines")
    return sorted(set(problems))


def _config_map(docs: list[Doc], prefix: str) -> Doc | None:
    return next((d for d in docs if d["kind"] == "ConfigMap" and re.fullmatch(
        rf"{re.escape(prefix)}(-[a-z0-9]{{10}})?", d["metadata"]["name"])), None)


def rendered_settings(docs: list[Doc]) -> Settings | None:
    """The settings every pod reads: the defaults with the rendered lakehouse-settings ConfigMap's variables.

    An overlay may change them (more click partitions on a real cluster); whatever it renders is
    what the pods run with, so the other resources are checked against that, not against the base.
    """
    env = _config_map(docs, "lakehouse-settings")
    if env is None:
        return None
    nested: dict[str, Any] = {}
    for key, value in env.get("data", {}).items():
        *sections, field = key.removeprefix("LAKEHOUSE_").lower().split("__")
        target = nested
        for section in sections:
            target = target.setdefault(section, {})
        target[field] = value
    return declared_settings(nested)


def settings_match(docs: list[Doc]) -> list[str]:
    """Topics, partitions, bucket, catalog, endpoints and exporter ports are the settings' values."""
    try:
        settings = rendered_settings(docs)
    except ValueError as exc:  # pydantic's ValidationError: a variable that is no setting, or a bad value
        return [f"ConfigMap lakehouse-settings does not make valid settings: {exc}"]
    if settings is None:
        return ["no ConfigMap lakehouse-settings: the pods would run on the defaults (run `make k8s-generate`)"]
    problems = []
    rendered = (_config_map(docs, "lakehouse-settings") or {}).get("data", {})
    if missing := sorted(settings_env().keys() - rendered.keys()):
        problems.append(f"ConfigMap lakehouse-settings lacks {missing[:3]} of deploy.k8s.profile.settings_env(): "
                        "run `python -m deploy.k8s.generate`")
    topics = {d["spec"]["topicName"]: d["spec"]["partitions"] for d in docs if d["kind"] == "KafkaTopic"}
    if topics != settings.topics():
        problems.append(f"KafkaTopics {topics} differ from the settings' topics {settings.topics()}")
    catalog = _config_map(docs, "trino-catalog")
    if catalog is None or f"{settings.catalog.trino_catalog}.properties" not in catalog.get("data", {}):
        problems.append(f"Trino has no catalog named {settings.catalog.trino_catalog!r} (ConfigMap trino-catalog)")
    hive = _config_map(docs, "hive-site")
    if hive is None or settings.s3.warehouse not in hive["data"].get("hive-site.xml", ""):
        problems.append(f"hive-site.xml does not use the warehouse {settings.s3.warehouse}")
    ports = {d["metadata"]["name"]: {p["port"] for p in d["spec"]["ports"]} for d in docs if d["kind"] == "Service"}
    for section in ("s3", "postgres", "metastore", "mariadb", "trino", "prometheus"):
        service = getattr(settings, section)
        if service.port not in ports.get(service.host, set()):
            problems.append(f"settings {section} point at {service.address}, but Service {service.host!r} "
                            f"offers ports {sorted(ports.get(service.host, []))}")
    kafka = next((d for d in docs if d["kind"] == "Kafka"), None)
    if kafka and settings.kafka.port not in {lst["port"] for lst in kafka["spec"]["kafka"]["listeners"]}:
        problems.append(f"no Kafka listener on the settings' port {settings.kafka.port}")
    exporters = settings.metrics.exporters()
    for owner, labels, pod in pod_templates(docs):
        exporter = labels.get(EXPORTER_LABEL)
        if exporter is None:
            continue
        if exporter not in exporters:
            problems.append(f"{owner}: {EXPORTER_LABEL}={exporter!r} is none of {sorted(exporters)}")
            continue
        declared = {p["containerPort"] for c in pod["containers"] for p in c.get("ports", []) if p.get("name") == "metrics"}
        if declared and declared != {exporters[exporter]}:
            problems.append(f"{owner}: metrics port {sorted(declared)} but settings say {exporters[exporter]}")
    return problems


def pinned_images(docs: list[Doc]) -> list[str]:
    version = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["version"]
    problems = []
    for owner, _, pod in pod_templates(docs):
        for container in pod.get("initContainers", []) + pod.get("containers", []):
            image = container["image"]
            repo, _, tag = image.rpartition(":") if ":" in image.split("/")[-1] else (image, "", "")
            if not tag or tag == "latest":
                problems.append(f"{owner}: image {image!r} has no pinned tag")
            elif repo == "lakehouse" and tag != version:
                problems.append(f"{owner}: image lakehouse:{tag} but the project is version {version}")
    return problems


def _repo_path(path: str) -> bool:
    return path.startswith(APP_DIR + "/") and (REPO_ROOT / path.removeprefix(APP_DIR + "/")).is_file()


def entrypoints(docs: list[Doc]) -> list[str]:
    """Every file or module the lakehouse image is asked to run exists in the repo."""
    problems = []
    for doc in docs:
        for spec in _spark_specs(doc):
            path = spec["mainApplicationFile"].removeprefix("local://")
            if not _repo_path(path):
                problems.append(f"{_name(doc)}: mainApplicationFile {spec['mainApplicationFile']} is not in the repo")
    for owner, _, pod in pod_templates(docs):
        for container in pod.get("containers", []):
            if not container["image"].startswith("lakehouse"):
                continue
            command = container.get("command", [])
            for i, arg in enumerate(command):
                if arg == "-m" and i + 1 < len(command):
                    module = REPO_ROOT / command[i + 1].replace(".", "/")
                    if not (module.with_suffix(".py").is_file() or (module / "__main__.py").is_file()):
                        problems.append(f"{owner}: module {command[i + 1]} is not in the repo")
                if arg == "-f" and i + 1 < len(command):
                    problems += [f"{owner}: locustfile {f} is not in the repo"
                                 for f in command[i + 1].split(",") if not _repo_path(f)]
    return problems


def cross_reference_problems(docs: list[Doc]) -> list[str]:
    return (service_selectors(docs) + strimzi_clusters(docs) + exposure(docs) + dangling_references(docs)
            + settings_match(docs) + pinned_images(docs) + entrypoints(docs))
