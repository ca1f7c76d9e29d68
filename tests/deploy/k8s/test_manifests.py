"""The Kubernetes deployment, validated offline as strictly as the tools allow.

No cluster runs here (no Docker engine), so these tests render the kind overlay with
kubectl and hold every resource to the real schemas: Kubernetes' own (strict), the
operators' CRDs (strict), our cross-references to the settings, checkov's policies,
promtool for the generated Prometheus config. The last group proves each validator
catches the kind of mistake it exists for.
"""

from __future__ import annotations

import copy
import os
import shutil
import stat
import subprocess

import pytest
import yaml

from deploy.k8s import cross_references as xref
from deploy.k8s import generate, validate
from deploy.k8s.profile import KAFKA_CLUSTER, cluster_settings, secret_env_names
from deploy.k8s.secrets import ensure_credentials_env
from deploy.prometheus_config import EXPORTER_LABEL
from lakehouse.settings import REPO_ROOT


@pytest.fixture(scope="module")
def docs() -> list[dict]:
    return validate.render()


def by_kind(docs: list[dict], kind: str) -> list[dict]:
    return [d for d in docs if d["kind"] == kind]


def named(docs: list[dict], kind: str, name: str) -> dict:
    return next(d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name)


def test_generated_manifests_match_the_code():
    assert generate.stale() == [], "k8s/base/generated is stale: run `make k8s-generate`"


def test_overlay_renders_the_whole_system(docs):
    kinds = {d["kind"] for d in docs}
    assert {"Namespace", "Kafka", "KafkaNodePool", "KafkaTopic", "StatefulSet", "Deployment", "Job", "Service",
            "SparkApplication", "ScheduledSparkApplication", "NetworkPolicy", "Secret", "ConfigMap"} <= kinds
    assert {d["metadata"]["name"] for d in by_kind(docs, "SparkApplication")} == {"pipeline"}
    # the binlog capture (the source connector) is a plain Deployment; every data job runs in the pipeline
    deployments = {d["metadata"]["name"] for d in by_kind(docs, "Deployment")}
    assert "cdc-capture" in deployments and not deployments & {"dims-apply", "live-aggregates"}
    jobs = named(docs, "SparkApplication", "pipeline")["spec"]["arguments"][-1].split(",")
    assert {"clicks", "dims", "aggregate", "maintain"} == set(jobs)
    assert {d["spec"]["topicName"] for d in by_kind(docs, "KafkaTopic")} == set(cluster_settings().topics())
    assert all(d["metadata"].get("namespace") == "lakehouse" for d in docs if d["kind"] != "Namespace")
    deny = named(docs, "NetworkPolicy", "default-deny")
    assert deny["spec"] == {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}
    # Strimzi KRaft: one node pool that is controller and broker, for the cluster the clients use.
    pool = by_kind(docs, "KafkaNodePool")[0]
    assert set(pool["spec"]["roles"]) == {"controller", "broker"}
    assert pool["metadata"]["labels"]["strimzi.io/cluster"] == KAFKA_CLUSTER


def test_builtin_kinds_pass_strict_schemas(docs):
    assert validate.builtin_problems(docs) == []


def test_custom_resources_pass_their_crds(docs):
    crds = validate.crd_dir()
    if crds is None:
        pytest.skip(validate.CRD_HINT)
    custom = [d for d in docs if validate.is_custom(d)]
    assert len(custom) >= 8  # Kafka, node pool, 4 topics, the pipeline application, 1 scheduled
    assert validate.custom_problems(docs, crds) == []


def test_resources_reference_each_other_and_the_settings(docs):
    assert xref.cross_reference_problems(docs) == []


def test_checkov_passes_and_every_skip_says_why(docs):
    assert validate.checkov_problems(docs) == []
    for doc in docs:
        for key, value in doc["metadata"].get("annotations", {}).items():
            if key.startswith("checkov.io/skip"):
                check, _, reason = value.partition("=")
                assert check.startswith("CKV") and len(reason.split()) >= 4, f"{doc['metadata']['name']}: {value}"


def test_no_credential_is_tracked_and_containers_stay_unprivileged(docs):
    tracked = subprocess.run(["git", "ls-files"], cwd=REPO_ROOT, capture_output=True, text=True).stdout.split()
    assert not [p for p in tracked if p.endswith("credentials.env")]
    secret = by_kind(docs, "Secret")[0]
    assert set(secret["data"]) == set(secret_env_names())
    for owner, _, pod in xref.pod_templates(docs):
        for container in pod.get("initContainers", []) + pod.get("containers", []):
            ctx = container.get("securityContext", {})
            if "[" in owner:  # Spark pods: their context is on the application (checked by the CRD test)
                continue
            assert ctx.get("allowPrivilegeEscalation") is False, owner
            assert ctx.get("capabilities", {}).get("drop") == ["ALL"], owner
            assert ctx.get("readOnlyRootFilesystem") is True, owner
            assert pod["securityContext"]["runAsNonRoot"] is True, owner
    for service in by_kind(docs, "Service"):  # Trino, Grafana and the rest: port-forward only
        assert service["spec"].get("type", "ClusterIP") == "ClusterIP", service["metadata"]["name"]


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool comes with Debian's prometheus (make install)")
def test_kubernetes_prometheus_config_passes_promtool(tmp_path, docs):
    """Everything but the discovery block is checked by promtool (relabel rules, regexes, rule files).

    Debian's Prometheus is built without Kubernetes service discovery, so its promtool rejects
    ``kubernetes_sd_configs`` as an unknown field; the test swaps that block for a static target
    and checks the block's own shape here.
    """
    config = yaml.safe_load((generate.OUT / "prometheus.yml").read_text())
    for job in config["scrape_configs"]:
        sd = job.pop("kubernetes_sd_configs", None)
        if sd is not None:
            assert sd == [{"role": "pod", "namespaces": {"names": ["lakehouse"]}}], job["job_name"]
            job["static_configs"] = [{"targets": ["127.0.0.1:1"]}]
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(config))
    shutil.copy(generate.OUT / "lakehouse-rules.yml", tmp_path / "lakehouse-rules.yml")
    result = subprocess.run(["promtool", "check", "config", str(tmp_path / "prometheus.yml")],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    jobs = {job["job_name"] for job in config["scrape_configs"]}
    carried = set(exporter_labels(docs))
    assert carried | {"kafka", "prometheus"} == jobs, "a scrape job per exporter some pod carries, no job without one"
    assert carried <= set(cluster_settings().metrics.exporters())


def exporter_labels(tree) -> list[str]:
    """Every value of the exporter label anywhere in the rendered manifests (pod templates, Spark drivers)."""
    if isinstance(tree, dict):
        found = [tree[EXPORTER_LABEL]] if isinstance(tree.get(EXPORTER_LABEL), str) else []
        return found + [v for value in tree.values() for v in exporter_labels(value)]
    if isinstance(tree, list):
        return [v for item in tree for v in exporter_labels(item)]
    return []


def test_credentials_env_is_private_and_stable(tmp_path):
    path = tmp_path / "credentials.env"
    assert ensure_credentials_env(path) == secret_env_names()
    first = path.read_text()
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert ensure_credentials_env(path) == [] and path.read_text() == first


# ------------------------------------------------------------ each validator catches its mistake

def test_a_misspelt_field_in_a_spark_application_fails(docs):
    crds = validate.crd_dir()
    if crds is None:
        pytest.skip(validate.CRD_HINT)
    broken = copy.deepcopy(named(docs, "SparkApplication", "pipeline"))
    broken["spec"]["driver"]["memroy"] = broken["spec"]["driver"].pop("memory")
    problems = validate.custom_problems([broken], crds)
    assert any("memroy" in p for p in problems), problems


def test_a_wrong_type_in_the_kafka_resource_fails(docs):
    crds = validate.crd_dir()
    if crds is None:
        pytest.skip(validate.CRD_HINT)
    broken = copy.deepcopy(by_kind(docs, "Kafka")[0])
    broken["spec"]["kafka"]["listeners"][0]["port"] = "9092"
    problems = validate.custom_problems([broken], crds)
    assert any("listeners/0/port" in p for p in problems), problems


def test_an_unknown_field_in_a_builtin_kind_fails(docs):
    broken = copy.deepcopy(named(docs, "Deployment", "grafana"))
    broken["spec"]["template"]["spec"]["containers"][0]["imagePullPolcy"] = "Always"
    assert validate.builtin_problems([broken])


def test_a_dangling_service_selector_fails(docs):
    broken = copy.deepcopy(docs)
    named(broken, "Service", "trino")["spec"]["selector"] = {"app.kubernetes.io/name": "trinoo"}
    assert any("Service/trino selects no pod" in p for p in xref.cross_reference_problems(broken))


def test_a_service_or_port_open_to_the_outside_fails(docs):
    assert xref.exposure(docs) == []
    broken = copy.deepcopy(docs)
    named(broken, "Service", "grafana")["spec"]["type"] = "NodePort"
    named(broken, "Deployment", "trino-coordinator")["spec"]["template"]["spec"]["containers"][0]["ports"][0][
        "hostPort"] = 8080
    problems = xref.exposure(broken)
    assert any("Service/grafana is of type NodePort" in p for p in problems), problems
    assert any("binds host port 8080" in p for p in problems), problems


def test_a_missing_configmap_and_a_drifted_topic_fail(docs):
    broken = [d for d in copy.deepcopy(docs) if not d["metadata"]["name"].startswith("hive-site")]
    by_kind(broken, "KafkaTopic")[0]["spec"]["partitions"] += 1
    problems = xref.cross_reference_problems(broken)
    assert any("ConfigMap 'hive-site" in p for p in problems), problems
    assert any("KafkaTopics" in p for p in problems), problems


def test_an_entrypoint_missing_from_the_repo_fails(docs):
    broken = copy.deepcopy(named(docs, "SparkApplication", "pipeline"))
    broken["spec"]["mainApplicationFile"] = "local:///opt/lakehouse/pipeline/nope.py"
    assert any("nope.py" in p for p in xref.entrypoints([broken]))


def test_checkov_catches_a_privileged_container(docs):
    broken = copy.deepcopy(named(docs, "Deployment", "grafana"))
    broken["spec"]["template"]["spec"]["containers"][0]["securityContext"]["privileged"] = True
    assert any("CKV_K8S_16" in p for p in validate.checkov_problems([broken]))


def test_cluster_jobs_leave_master_jars_and_driver_to_spark_submit():
    from deploy.k8s.profile import cluster_overrides
    from lakehouse.settings import Settings
    from pipeline.spark_session import spark_conf

    overrides = cluster_overrides()
    overrides["s3"].update(access_key="k", secret_key="s")
    cluster = spark_conf(Settings.model_validate(overrides), "x")
    overrides.update(pipeline={"spark_deploy": "local"}, tools_dir=str(REPO_ROOT / ".tools"))
    local = spark_conf(Settings.model_validate(overrides), "x")
    assert {"spark.jars", "spark.driver.host", "spark.driver.memory"} <= set(local)
    assert not {"spark.jars", "spark.driver.host", "spark.driver.memory", "spark.app.name"} & set(cluster)
    assert cluster["spark.sql.catalog.lakehouse.uri"] == "thrift://hive-metastore:9083"


def test_the_cluster_database_writes_the_binlog_the_capture_needs():
    """MySQL in the cluster gets the binlog options the local MariaDB has (column names in row events)."""
    settings = cluster_settings()
    config = generate.files(settings)["lakehouse-binlog.cnf"].splitlines()
    for option, value in settings.mariadb.REQUIRED_BINLOG.items():
        assert f"{option}={value}" in config


def test_the_cluster_runs_the_metastore_and_the_spark_the_suite_tests(docs):
    """Hive 4 dropped the get_table call Spark 4.1's Hive client and PyIceberg make; an operator on Spark 4 submits
    with another Spark than the jobs': the cluster must run what the local suite runs."""
    import pyspark

    hms = named(docs, "Deployment", "hive-metastore")["spec"]["template"]["spec"]["containers"][0]
    assert hms["image"].split(":")[0] == "lakehouse"  # pyspark's Hive 2.3.10 jars, as locally
    assert hms["command"][:3] == ["python", "-m", "deploy.metastore"]
    assert (REPO_ROOT / "deploy" / "metastore.py").exists()
    local = generate.hive_site(cluster_settings())
    for prop in ("datanucleus.schema.autoCreateAll", "hive.metastore.warehouse.dir", "fs.s3.impl"):
        assert f"<name>{prop}</name>" in local
    apps = by_kind(docs, "SparkApplication") + [d["spec"]["template"] for d in by_kind(docs, "ScheduledSparkApplication")]
    for app in apps:
        spec = app.get("spec", app)
        assert spec["sparkVersion"] == pyspark.__version__
        assert spec["image"].split(":")[0] == "lakehouse"
