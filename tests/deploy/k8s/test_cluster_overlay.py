"""The multi-node overlay (k8s/overlays/cluster), held to the kind overlay's checks and to its purpose.

It scales out what is parallel: Kafka brokers and click partitions (a partition range is a
task of every micro-batch), Spark executors, Trino workers; and it keeps one committer per
table (one pipeline application, one replica of each Spark-free writer).
"""

from __future__ import annotations

import pytest

from deploy.k8s import validate
from deploy.k8s.cross_references import rendered_settings
from lakehouse.settings import REPO_ROOT
from tests.support.k8s import pods, secret_given

OVERLAY = REPO_ROOT / "k8s/overlays/cluster"


@pytest.fixture(scope="module")
def docs() -> list[dict]:
    return validate.render(OVERLAY)


def _named(docs, kind, name):
    return next(d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name)


def test_it_passes_every_offline_check_the_kind_overlay_passes(docs):
    assert validate.builtin_problems(docs) == []
    assert validate.cross_reference_problems(docs) == []
    if (crds := validate.crd_dir()) is not None:
        assert validate.custom_problems(docs, crds) == []
    if validate.checkov_binary() is not None:
        assert validate.checkov_problems(docs) == []
    assert not [name for name, pod, _, _ in pods(docs) if secret_given(pod)[1]], "a pod takes the whole Secret"


def test_kafka_is_replicated_and_the_clicks_have_more_partitions(docs):
    pool = _named(docs, "KafkaNodePool", "combined")
    config = _named(docs, "Kafka", "lakehouse")["spec"]["kafka"]["config"]
    assert pool["spec"]["replicas"] == 3 and pool["spec"]["storage"]["class"]
    assert config["default.replication.factor"] == 3 and config["min.insync.replicas"] == 2
    topics = {d["spec"]["topicName"]: d["spec"] for d in docs if d["kind"] == "KafkaTopic"}
    settings = rendered_settings(docs)
    assert topics[settings.kafka.clicks_topic]["partitions"] == settings.kafka.clicks_partitions == 12
    assert all(t["replicas"] == 3 for t in topics.values())
    assert topics[settings.cdc_position_topic]["partitions"] == 1  # the capture's checkpoints stay in order


def test_parallel_parts_scale_out_and_each_table_keeps_one_committer(docs):
    pipeline = _named(docs, "SparkApplication", "pipeline")
    assert pipeline["spec"]["executor"]["instances"] == 3
    assert len([d for d in docs if d["kind"] == "SparkApplication"]) == 1
    assert _named(docs, "Deployment", "cdc-capture")["spec"]["replicas"] == 1
    workers = _named(docs, "Deployment", "trino-worker")
    assert workers["spec"]["replicas"] >= 2
    coordinator = next(d for d in docs if d["kind"] == "ConfigMap"
                       and d["metadata"]["name"].startswith("trino-coordinator-config"))
    assert "node-scheduler.include-coordinator=false" in coordinator["data"]["config.properties"]


def test_every_volume_has_a_storage_class(docs):
    for d in docs:
        if d["kind"] == "StatefulSet":
            for claim in d["spec"]["volumeClaimTemplates"]:
                assert claim["spec"].get("storageClassName"), d["metadata"]["name"]
