"""`make up`'s steps, in the order it runs them (`DRY_RUN=1`), against what they need.

No schema check sees these: the operators' charts write into the lakehouse namespace, so it
must exist (restricted) before them; Strimzi must be told to give its pods a restricted
security context; and `make up` must wait for every workload the overlay holds, under its
current kind (the dimension apply and the live aggregates became Deployments).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess

import pytest
import yaml

from deploy.k8s import validate
from lakehouse.settings import REPO_ROOT

NS = "lakehouse"


def _dry_run() -> list[str]:
    done = subprocess.run(["bash", "deploy/k8s/up.sh", "kind-test", NS, "lakehouse", "1.2.0", "2.5.2"],
                          cwd=REPO_ROOT, env={**os.environ, "DRY_RUN": "1"}, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    return [line[2:] for line in done.stderr.splitlines() if line.startswith("+ ")]


@pytest.fixture(scope="module")
def steps() -> list[str]:
    return _dry_run()


@pytest.fixture(scope="module")
def docs() -> list[dict]:
    return validate.render()


def _first(steps: list[str], *words: str) -> int:
    return next(i for i, step in enumerate(steps) if all(w in step for w in words))


def test_the_namespace_exists_restricted_before_the_operators_that_write_into_it(steps):
    namespace = _first(steps, "apply -f k8s/base/namespace.yaml")
    assert namespace < _first(steps, "helm upgrade --install strimzi")
    assert namespace < _first(steps, "helm upgrade --install spark-operator")
    manifest = yaml.safe_load((REPO_ROOT / "k8s/base/namespace.yaml").read_text())
    assert manifest["metadata"]["name"] == NS
    assert manifest["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"


def test_strimzi_gives_its_pods_the_restricted_security_context(steps):
    strimzi = steps[_first(steps, "helm upgrade --install strimzi")]
    assert "extraEnvs[0].name=STRIMZI_POD_SECURITY_PROVIDER_CLASS" in strimzi
    assert "extraEnvs[0].value=restricted" in strimzi


def test_the_image_is_built_and_loaded_before_anything_runs_it(steps):
    build, load = _first(steps, "docker build"), _first(steps, "kind load image-archive")
    assert build < load < _first(steps, "apply --server-side -k")


def _containers(doc: dict) -> list[dict]:
    spec = doc.get("spec", {})
    pod = spec.get("jobTemplate", {}).get("spec", {}).get("template", {}) or spec.get("template", {})
    return pod.get("spec", {}).get("containers", []) + pod.get("spec", {}).get("initContainers", [])


def test_the_image_is_tagged_by_its_content_and_every_workload_runs_that_tag(steps, tmp_path):
    apply = steps[_first(steps, "apply --server-side -k")]
    overlay = apply.split(" -k ")[1].split()[0]
    kustomization = (REPO_ROOT / overlay / "kustomization.yaml").read_text()
    tag = re.search(r'newTag: "([0-9a-f]{12})"', kustomization).group(1)
    assert f"docker build -f deploy/Dockerfile -t lakehouse:{tag} ." in steps
    assert _dry_run()[_first(steps, "apply --server-side -k")] == apply, "the same tree must give the same tag"
    # rendered as kubectl renders it, on a copy with throwaway credentials
    shutil.copytree(REPO_ROOT / "k8s", tmp_path / "k8s", ignore=shutil.ignore_patterns("credentials.env"))
    validate.ensure_credentials_env(tmp_path / "k8s/overlays/kind/credentials.env")
    (tmp_path / overlay).mkdir(parents=True)
    (tmp_path / overlay / "kustomization.yaml").write_text(kustomization)
    rendered = subprocess.run(["kubectl", "kustomize", str(tmp_path / overlay)], capture_output=True, text=True,
                              check=True).stdout
    docs = [d for d in yaml.safe_load_all(rendered) if d]
    ours = [c["image"] for d in docs for c in _containers(d) if c["image"].startswith("lakehouse")]
    ours += [d["spec"]["image"] for d in docs if d["kind"] == "SparkApplication"]
    ours += [d["spec"]["template"]["image"] for d in docs if d["kind"] == "ScheduledSparkApplication"]
    assert len(ours) >= 8 and set(ours) == {f"lakehouse:{tag}"}
    # a Job's template is immutable: the bucket Job of an earlier tag is deleted before the apply
    assert _first(steps, "delete job create-bucket") < _first(steps, "apply --server-side -k")


def test_make_up_ends_with_an_end_to_end_check_through_locust_and_trino(steps):
    check = _first(steps, "deploy.k8s.end_to_end", "--context kind-kind-test", f"--namespace {NS}")
    assert _first(steps, "sparkapplication/pipeline") < check == len(steps) - 1


def test_up_sh_needs_no_gnu_only_tool():
    """Stock macOS has none of these: a `set -e` script stops on its first use (`make up` died on sha256sum)."""
    script = (REPO_ROOT / "deploy/k8s/up.sh").read_text()
    code = "\n".join(line.split("#", 1)[0] for line in script.splitlines())
    for gnu_only in ("sha256sum", "md5sum", "readlink -f", "sed -i", "date -d", "xargs -0", "sort -z", "timeout "):
        assert gnu_only not in code, f"up.sh uses {gnu_only!r}, which stock macOS lacks"


def test_images_are_loaded_into_kind_from_archives(steps):
    """`kind load docker-image` fails for some images with Docker's containerd store (kind 3795, 4247)."""
    assert not [s for s in steps if "kind load docker-image" in s]
    for image in ("lakehouse-spark-operator:", "lakehouse:"):
        save = _first(steps, "docker save", image)
        assert "kind load image-archive" in steps[save + 1] and "--name kind-test" in steps[save + 1]


def test_every_image_the_project_builds_runs_as_a_numeric_user(steps):
    """Pods of these images run with runAsNonRoot (ours, and the spark-operator chart's with no runAsUser): the
    kubelet starts them only when the image's user is a number it can check."""
    built = sorted({re.search(r"docker build -f (\S+)", s).group(1) for s in steps if "docker build -f" in s})
    assert built == ["deploy/Dockerfile", "deploy/k8s/spark-operator.Dockerfile"]
    for dockerfile in built:
        users = re.findall(r"^USER\s+(\S+)", (REPO_ROOT / dockerfile).read_text(), re.M)
        assert users and re.fullmatch(r"\d+(:\d+)?", users[-1]), f"{dockerfile} ends as USER {users[-1:]}"


def test_trino_is_ready_only_once_it_is_active(docs):
    coordinator = next(d for d in docs if d["kind"] == "Deployment"
                       and d["metadata"]["name"] == "trino-coordinator")
    probe = coordinator["spec"]["template"]["spec"]["containers"][0]["readinessProbe"]
    assert "/v1/info/state" in " ".join(probe["exec"]["command"]) and "ACTIVE" in " ".join(probe["exec"]["command"])


def test_up_waits_for_every_workload_the_overlay_holds(steps, docs):
    waited = " ".join(steps)
    for kind, prefix in (("Deployment", "deployment/"), ("StatefulSet", "statefulset/"),
                         ("SparkApplication", "sparkapplication/")):
        for doc in (d for d in docs if d["kind"] == kind):
            assert f"{prefix}{doc['metadata']['name']}" in waited, f"make up never waits for {kind} " \
                                                                 f"{doc['metadata']['name']}"
    for name in (w.split("/", 1)[1].split()[0] for w in steps if "deployment/" in w):
        assert any(d["kind"] == "Deployment" and d["metadata"]["name"] == name for d in docs), \
            f"make up waits for deployment/{name}, which the overlay does not hold"


def test_the_node_builds_every_image_it_needs_a_registry_for_before_entering_its_namespaces():
    """Inside the node's network namespace nothing reaches Debian's mirror: the stand-ins and both Dockerfiles'
    base images are built first, on the host's network (the first run from nothing failed on this)."""
    done = subprocess.run(["bash", "deploy/k8s/up.sh", "node", NS, "lakehouse", "1.2.0", "2.5.2"], cwd=REPO_ROOT,
                          env={**os.environ, "DRY_RUN": "1", "TARGET": "node"}, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    steps = [line[2:] for line in done.stderr.splitlines() if line.startswith("+ ")]
    entered = _first(steps, "deploy.node exec --")
    for before in ("deploy.node up", "deploy.node standins", "build-args lakehouse", "build-args operator"):
        assert _first(steps, before) < entered, f"{before} must run before the node's namespaces are entered"


def test_a_failed_command_whose_output_up_reads_stops_it():
    """`mapfile < <(cmd)` hides cmd's failure (up.sh went on without the node's build flags and pulled from a
    registry): up.sh reads command output only through assignments, which set -e checks."""
    script = (REPO_ROOT / "deploy" / "k8s" / "up.sh").read_text()
    assert "< <(" not in script
    failing = subprocess.run(["bash", "-c", 'set -euo pipefail; target=node; DRY_RUN=; node() { return 3; }\n'
                              + script.split("base_image_flags() {", 1)[1].split("\n}\n", 1)[0].join(
                                  ["base_image_flags() {", "\n}\n"]) + 'base_image_flags lakehouse flags; echo went on'],
                             capture_output=True, text=True, timeout=30)
    assert failing.returncode == 3 and "went on" not in failing.stdout


def test_the_whole_deployment_fits_a_kind_node_of_6_cpu_and_12_gib(steps, docs):
    """Every pod's requests at the busiest time (the nightly batch beside everything), Spark's driver and executor
    pods, the operators, kind's kube-system pods and the kubelet's eviction reserve included."""
    from deploy.k8s import budget

    cpu, memory = budget.total(docs)
    limit_cpu, limit_memory = budget.NODE_BUDGET
    table = budget.report(docs)
    print(table)
    assert cpu <= limit_cpu and memory <= limit_memory, table
    # the operators' requests counted are the ones make up sets on their charts
    strimzi = steps[_first(steps, "helm upgrade --install strimzi")]
    operator = steps[_first(steps, "helm upgrade --install spark-operator")]
    assert "resources.requests.memory=384Mi" in strimzi and "resources.requests.cpu=100m" in strimzi
    assert "controller.resources.requests.memory=128Mi" in operator and "webhook.resources.requests.memory=64Mi" in operator


def test_the_node_overlay_sized_by_up_fits_the_one_node_cluster():
    """The same budget on the one-node cluster (`make up-node`): the node overlay (stand-ins, no Grafana, no
    Strimzi), its CPU requests scaled as up.sh scales them, no kube-system pods, spark-operator's two pods."""
    from deploy.k8s import budget
    from deploy.node import sizing

    docs = validate.render(validate.KIND_OVERLAY.parent / "node")
    kind_cpu, by = sizing.workload_cpu(docs), sizing.factor(docs)
    scaled = sizing.scale(docs, by)
    cpu, memory = budget.total(scaled, sizing.NODE)
    table = budget.report(scaled, sizing.NODE)
    print(f"the node overlay asks {kind_cpu:.2f} CPU unscaled; x {by:.2f}\n{table}")
    assert kind_cpu > sizing.NODE_CPU, "the manifests fit two cores unscaled: the node's sizing is no longer needed"
    assert cpu <= sizing.NODE_CPU and memory <= sizing.NODE.capacity[1], table
    assert not any(r.owner.startswith(("Kafka/", "KafkaNodePool/", "Deployment/grafana")) for r in budget.requests(scaled))


def test_spark_pods_are_sized_the_way_spark_sizes_them():
    from deploy.k8s import budget

    assert budget.memory("1g") == budget.memory("1024Mi") == 2**30
    assert budget.memory("768m") == 768 * budget.MI and budget.memory("1G") == 10**9
    assert budget.cpu("250m") == 0.25 and budget.cpu(1) == 1.0
    # no memoryOverhead: 40 % for a Python application, at least 384 MiB
    assert budget._spark_pod({"cores": 1, "memory": "2g"}) == (1.0, 2 * 2**30 + int(0.4 * 2 * 2**30))
    assert budget._spark_pod({"cores": 1, "coreRequest": "250m", "memory": "512m"}) == (0.25, 896 * budget.MI)


def test_api_server_egress_goes_only_to_the_api_server(steps, docs):
    """The API server is no pod: the policy names addresses (kind's node network), narrowed by make up."""
    policy = next(d for d in docs if d["kind"] == "NetworkPolicy"
                  and d["metadata"]["name"] == "allow-api-server-egress")
    for rule in policy["spec"]["egress"]:
        assert rule.get("to") and all("ipBlock" in peer for peer in rule["to"]), rule
    assert _first(steps, "get endpointslices", "kubernetes.io/service-name=kubernetes") < \
        _first(steps, "apply --server-side -k")


def test_the_kind_node_image_is_pinned_by_digest():
    cluster = yaml.safe_load((REPO_ROOT / "k8s/kind-cluster.yaml").read_text())
    for node in cluster["nodes"]:
        assert re.fullmatch(r"kindest/node:v[\d.]+@sha256:[0-9a-f]{64}", node["image"]), node["image"]


def test_the_spark_operator_submits_with_the_spark_the_jobs_run(steps):
    """spark-operator's own images carry Spark 4.0 from 2.3 on: make up builds it on the jobs' Spark."""
    import pyspark

    dockerfile = (REPO_ROOT / "deploy/k8s/spark-operator.Dockerfile").read_text()
    project = (REPO_ROOT / "deploy/Dockerfile").read_text()
    bases = [re.search(r"^ARG SPARK_IMAGE=(spark:\S+)", text, re.M).group(1) for text in (dockerfile, project)]
    assert bases[0] == bases[1] and bases[0].startswith(f"spark:{pyspark.__version__}-"), bases
    build = steps[_first(steps, "docker build -f deploy/k8s/spark-operator.Dockerfile")]
    image = build.split(" -t ")[1].split()[0]
    install = steps[_first(steps, "helm upgrade --install spark-operator")]
    assert f"image.repository=library/{image.split(':')[0]}" in install and f"image.tag={image.split(':')[1]}" in install
    order = [_first(steps, "docker build -f deploy/k8s/spark-operator.Dockerfile"),
             _first(steps, "kind load image-archive", image.replace(":", "_")),
             _first(steps, "helm upgrade --install spark-operator")]
    assert order == sorted(order)


def test_the_writers_are_ready_only_while_they_work(docs):
    """Their /metrics answers as soon as the process starts; /ready only while batches succeed."""
    for name in ("cdc-capture",):
        deployment = next(d for d in docs if d["kind"] == "Deployment" and d["metadata"]["name"] == name)
        probe = deployment["spec"]["template"]["spec"]["containers"][0]["readinessProbe"]
        assert probe["httpGet"]["path"] == "/ready", name


def test_prometheus_scrapes_the_brokers_and_not_the_entity_operator():
    """Both carry strimzi.io/kind=Kafka; only the brokers export metrics (a kept entity operator is a
    target down for ever, and the broker-down alert with it)."""
    config = yaml.safe_load((REPO_ROOT / "k8s/base/generated/prometheus.yml").read_text())
    kafka = next(j for j in config["scrape_configs"] if j["job_name"] == "kafka")
    keep = [r for r in kafka["relabel_configs"] if r.get("action") == "keep"]
    assert keep == [{"source_labels": ["__meta_kubernetes_pod_label_strimzi_io_name"], "regex": "lakehouse-kafka",
                     "action": "keep"}]
