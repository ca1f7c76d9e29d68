"""`make up-node` whole, for real: the deployment passes its end-to-end check on the one-node cluster,
survives its executor and driver pods killed under load with an exact count (`make faults-node`), and
the host's network is the same while it runs and after `make down-node` as before it.

The longest of the node's tests (minutes on a built node; the first run builds the node and the
images); its output goes to ``.run/node/logs/test-up-node.log``.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from deploy.node import namespaces
from deploy.node.settings import NodeSettings

pytestmark = [pytest.mark.node, pytest.mark.skipif(os.geteuid() != 0, reason="the node needs root")]

ROOT = Path(__file__).resolve().parents[3]


def _make(target: str, log: Path, timeout: float) -> subprocess.CompletedProcess:
    with log.open("a") as out:
        out.write(f"\n==== make {target}\n")
        out.flush()
        return subprocess.run(["make", "-s", target], cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, timeout=timeout,
                              check=False)


def test_make_up_node_passes_end_to_end_survives_pod_kills_and_leaves_the_host_network_alone():
    log = NodeSettings().run_dir / "logs" / "test-up-node.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    before = namespaces.host_network()
    try:
        up = _make("up-node", log, timeout=3600)
        assert up.returncode == 0, f"make up-node failed: {log}"
        assert "end to end: Trino counted all" in log.read_text()
        running = namespaces.host_network()
        running.pop("netns")  # the node's own namespace is listed while it runs; nothing else may differ
        assert running == {k: v for k, v in before.items() if k != "netns"}, "the running node changed the host's network"
        faults = _make("faults-node", log, timeout=1800)
        assert faults.returncode == 0, f"make faults-node failed: {log}"
        assert "Trino counted exactly" in log.read_text()
    finally:
        down = _make("down-node", log, timeout=600)
    assert down.returncode == 0, f"make down-node failed: {log}"
    assert namespaces.host_network() == before, "the node changed the host's network"
