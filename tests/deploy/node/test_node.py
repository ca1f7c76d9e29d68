"""The one-node cluster, for real: it starts, runs a pod that reaches the API server through its
Service and resolves names through CoreDNS, and leaves the host's network as it found it."""

from __future__ import annotations

import json
import os
import textwrap

import pytest

from deploy.node import cluster, images, namespaces
from deploy.node.settings import NodeSettings

pytestmark = [pytest.mark.node, pytest.mark.skipif(os.geteuid() != 0, reason="the node needs root")]


@pytest.fixture(scope="module")
def node():
    settings = NodeSettings()
    before = namespaces.host_network()
    cluster.up(settings)
    images.start_docker(settings)
    yield settings
    cluster.down(settings)
    images.stop_docker(settings)
    assert namespaces.host_network() == before, "the node changed the host's network"


def test_a_pod_reaches_the_api_server_by_its_service_name_and_is_admitted_as_restricted(node):
    base = images.debian_image(node, "debian")
    images.load(node, images.pause_image(node))
    images.load(node, base)
    manifest = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "probe", "namespace": "probe"},
        "spec": {
            "restartPolicy": "Never",
            "securityContext": {"runAsNonRoot": True, "runAsUser": 65534, "seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [
                {
                    "name": "probe",
                    "image": base,
                    "imagePullPolicy": "Never",
                    "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
                    # bash's /dev/tcp: the Service's name resolves through CoreDNS, kube-proxy routes its address.
                    "command": [
                        "bash",
                        "-c",
                        textwrap.dedent("""\
                        getent hosts kubernetes.default.svc.cluster.local
                        exec 3<>/dev/tcp/kubernetes.default.svc.cluster.local/443 && echo connected"""),
                    ],
                }
            ],
        },
    }
    cluster.kubectl(node, "delete", "namespace", "probe", "--ignore-not-found", "--wait=true")
    created = cluster.kubectl(node, "create", "namespace", "probe")
    assert created.returncode == 0, created.stderr
    labelled = cluster.kubectl(node, "label", "namespace", "probe", "pod-security.kubernetes.io/enforce=restricted")
    assert labelled.returncode == 0, labelled.stderr
    path = node.run_dir / "probe-pod.json"
    path.write_text(json.dumps(manifest))
    applied = cluster.kubectl(node, "apply", "-f", str(path))
    assert applied.returncode == 0, applied.stderr
    done = cluster.kubectl(
        node, "wait", "-n", "probe", "pod/probe", "--for=jsonpath={.status.phase}=Succeeded", "--timeout=120s",
        timeout=130,
    )  # fmt: skip
    logs = cluster.kubectl(node, "logs", "-n", "probe", "pod/probe").stdout
    assert done.returncode == 0, f"{done.stderr}\n{logs}"
    address, _ = logs.split(maxsplit=1)
    assert address == str(node.api_service_ip)
    assert logs.strip().endswith("connected")
