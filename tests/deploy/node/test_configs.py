"""The node's kubelet keeps what it cannot get again: the faults a run found, as settings that must hold.
The configuration is rendered from the settings, as `python -m deploy.node up` writes it; no node is started."""

from __future__ import annotations

from deploy.node import configs, namespaces
from deploy.node.settings import NodeSettings


def test_the_kubelet_never_garbage_collects_images_no_registry_could_give_back():
    kubelet = configs.kubelet_config(NodeSettings())
    assert kubelet["imageGCHighThresholdPercent"] == 100  # usage never passes 100 %: GC never starts


def test_eviction_floors_are_absolute_for_space_and_keep_the_inode_thresholds():
    hard = configs.kubelet_config(NodeSettings())["evictionHard"]
    for signal in ("memory.available", "nodefs.available", "imagefs.available"):
        assert not hard[signal].endswith("%"), f"{signal}: a share of the machine's shared disk taints the node early"
    assert {"nodefs.inodesFree", "imagefs.inodesFree"} <= set(hard), "naming some thresholds drops the others"


def test_the_pods_and_builds_live_under_the_nodes_own_cgroup_and_the_kubelet_refuses_to_change_the_kernel():
    settings = NodeSettings()
    kubelet = configs.kubelet_config(settings)
    assert kubelet["cgroupRoot"] == settings.cgroup_root and kubelet["protectKernelDefaults"] is True
    assert len(namespaces.KUBELET_SYSCTLS) == 6  # every setting pkg/kubelet/cm checks, shown through the mount ns
