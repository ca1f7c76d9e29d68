"""Each node component's configuration, rendered from the settings into ``<run_dir>/config``.

The choices that differ from a kubeadm node, and why:
- containerd's CRI plugin restricts ``oom_score_adj`` (root here lacks CAP_SYS_RESOURCE: without
  it every sandbox fails with ``can't get final child's PID from pipe: EOF``), keeps pod network
  namespaces under its own state folder, and pulls nothing: every image is loaded beforehand.
- Pods get a point-to-point veth (CNI ``ptp``), not a bridge: all their traffic, pod to pod
  included, is routed through the node's namespace, where kube-proxy's rules see it (no
  ``br_netfilter`` needed).
- The kubelet runs on cgroupfs (the host has cgroup v1) under a cgroup root of the node's own, without
  swap checks, and refuses to
  change kernel settings (``protectKernelDefaults``): the mount namespace shows it the values it
  wants. kube-proxy leaves the host-wide conntrack table size alone.
- CoreDNS is a process of the node listening on the node's address (the pods' DNS server), not a
  pod: the cluster needs no image of it.
"""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from deploy.node.pki import pki_dir
from deploy.node.settings import NodeSettings

PAUSE_IMAGE = "lakehouse.local/pause:1"
#: the kubelet's eviction floors, absolute: the node shares the machine's disk, where a percentage (of
#: 250 GB here) would taint it for disk pressure with many gigabytes still free
#: (naming any threshold drops the kubelet's defaults for the others: the inode ones are named too)
EVICTION_HARD = {"memory.available": "200Mi", "nodefs.available": "2Gi", "imagefs.available": "2Gi",
                 "nodefs.inodesFree": "5%", "imagefs.inodesFree": "5%"}


def config_dir(settings: NodeSettings) -> Path:
    return settings.run_dir / "config"


def containerd_toml(settings: NodeSettings) -> str:
    run = settings.run_dir / "containerd"
    cri = 'plugins."io.containerd.grpc.v1.cri"'
    return "\n".join(
        [
            "version = 2",
            f'root = "{run}/root"',
            f'state = "{run}/state"',
            "[grpc]",
            f'  address = "{settings.containerd_socket}"',
            "[ttrpc]",
            f'  address = "{settings.containerd_socket}.ttrpc"',
            "[debug]",
            '  level = "warn"',
            "[metrics]",
            '  address = ""',
            f"[{cri}]",
            f'  sandbox_image = "{PAUSE_IMAGE}"',
            "  restrict_oom_score_adj = true",
            "  netns_mounts_under_state_dir = true",
            "  enable_unprivileged_ports = true",
            "  enable_unprivileged_icmp = true",
            f"[{cri}.containerd]",
            '  snapshotter = "overlayfs"',
            '  default_runtime_name = "runc"',
            f"[{cri}.containerd.runtimes.runc]",
            '  runtime_type = "io.containerd.runc.v2"',
            f"[{cri}.containerd.runtimes.runc.options]",
            "  SystemdCgroup = false",
            f"[{cri}.cni]",
            '  bin_dir = "/usr/lib/cni"',
            f'  conf_dir = "{config_dir(settings) / "cni"}"',
            '[plugins."io.containerd.internal.v1.opt"]',
            f'  path = "{run}/opt"',
            "",
        ]
    )


def cni_conflist(settings: NodeSettings) -> dict:
    return {
        "cniVersion": "1.0.0",
        "name": "lakehouse-node",
        "plugins": [
            {
                "type": "ptp",
                "ipMasq": False,
                "mtu": 1500,
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{"subnet": str(settings.pod_cidr)}]],
                    "routes": [{"dst": "0.0.0.0/0"}],
                    "dataDir": str(settings.run_dir / "cni" / "ipam"),
                },
            },
            {"type": "portmap", "capabilities": {"portMappings": True}},
        ],
    }


def kubelet_config(settings: NodeSettings) -> dict:
    pki = pki_dir(settings)
    return {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "address": str(settings.node_ip),
        "healthzBindAddress": "127.0.0.1",
        "readOnlyPort": 0,
        "authentication": {
            "anonymous": {"enabled": False},
            "webhook": {"enabled": True},
            "x509": {"clientCAFile": str(pki / "ca.crt")},
        },
        "authorization": {"mode": "Webhook"},
        "tlsCertFile": str(pki / "kubelet-serving.crt"),
        "tlsPrivateKeyFile": str(pki / "kubelet-serving.key"),
        "cgroupDriver": "cgroupfs",
        "cgroupRoot": settings.cgroup_root,
        "failSwapOn": False,
        "protectKernelDefaults": True,
        "containerRuntimeEndpoint": f"unix://{settings.containerd_socket}",
        "clusterDNS": [str(settings.dns_ip)],
        "clusterDomain": settings.cluster_domain,
        "resolvConf": str(config_dir(settings) / "resolv.conf"),
        "podLogsDir": str(settings.run_dir / "pod-logs"),
        "serializeImagePulls": False,
        "evictionHard": EVICTION_HARD,
        # No image GC (as on kind's nodes): every image was loaded by hand and none can be pulled again. The
        # kubelet reckons the shared disk's usage as capacity minus what is available to it, the filesystem's
        # reserve included, and it removed the pause image: no pod could start after that.
        "imageGCHighThresholdPercent": 100,
        "maxPods": 60,
    }


def kube_proxy_config(settings: NodeSettings) -> dict:
    return {
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
        "kind": "KubeProxyConfiguration",
        "mode": "iptables",
        "clientConnection": {"kubeconfig": str(pki_dir(settings) / "kube-proxy.kubeconfig")},
        "clusterCIDR": str(settings.pod_cidr),
        "hostnameOverride": settings.name,
        "healthzBindAddress": "127.0.0.1:10256",
        "metricsBindAddress": "127.0.0.1:10249",
        # nf_conntrack_max is one table for the whole machine: leave it as the host has it.
        "conntrack": {"maxPerCore": 0, "min": 0, "tcpEstablishedTimeout": "0s", "tcpCloseWaitTimeout": "0s"},
    }


def corefile(settings: NodeSettings) -> str:
    domain = settings.cluster_domain
    return (
        ".:53 {\n"
        f"    bind {settings.dns_ip}\n"
        "    errors\n"
        "    health 127.0.0.1:8080\n"
        "    ready 127.0.0.1:8181\n"
        f"    kubernetes {domain} in-addr.arpa ip6.arpa {{\n"
        f"        kubeconfig {pki_dir(settings) / 'coredns.kubeconfig'} {settings.name}\n"
        "        pods insecure\n"
        "        fallthrough in-addr.arpa ip6.arpa\n"
        "    }\n"
        "    cache 30\n"
        "}\n"
    )


# What CoreDNS reads to answer for services and pods (kubeadm grants the same to its CoreDNS).
COREDNS_RBAC = [
    {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": "system:coredns"},
        "rules": [
            {"apiGroups": [""], "resources": ["endpoints", "services", "pods", "namespaces"], "verbs": ["list", "watch"]},
            {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"], "verbs": ["list", "watch"]},
        ],
    },
    {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": "system:coredns"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "system:coredns"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "system:coredns"}],
    },
]


STORAGE_CLASS = "standard"  # kind's default class, which the manifests' claims get without naming one
VOLUMES = 8


def storage(settings: NodeSettings) -> list[dict]:
    """The default StorageClass and the volumes the claims bind to: folders of the node, open to any pod user.

    The node has no provisioner: ``VOLUMES`` volumes wait for claims (each StatefulSet's one), bound
    when a pod first uses one, and kept with their data when a claim goes (``Retain``).
    """
    docs: list[dict] = [
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "StorageClass",
            "metadata": {
                "name": STORAGE_CLASS,
                "annotations": {"storageclass.kubernetes.io/is-default-class": "true"},
            },
            "provisioner": "kubernetes.io/no-provisioner",
            "volumeBindingMode": "WaitForFirstConsumer",
            "reclaimPolicy": "Retain",
        }
    ]
    for index in range(VOLUMES):
        docs.append(
            {
                "apiVersion": "v1",
                "kind": "PersistentVolume",
                "metadata": {"name": f"node-volume-{index}"},
                "spec": {
                    "capacity": {"storage": "50Gi"},
                    "accessModes": ["ReadWriteOnce"],
                    "persistentVolumeReclaimPolicy": "Retain",
                    "storageClassName": STORAGE_CLASS,
                    "hostPath": {"path": str(volume_dir(settings, index)), "type": "Directory"},
                },
            }
        )
    return docs


def volume_dir(settings: NodeSettings, index: int) -> Path:
    return settings.run_dir / "volumes" / f"volume-{index}"


def _write(path: Path, text: str) -> None:
    """Only a changed file is written: kube-proxy exits when its configuration file is touched."""
    if not path.exists() or path.read_text() != text:
        path.write_text(text)


def write_all(settings: NodeSettings) -> Path:
    """Render every file (they follow the settings); returns the folder."""
    folder = config_dir(settings)
    (folder / "cni").mkdir(parents=True, exist_ok=True)
    _write(folder / "containerd.toml", containerd_toml(settings))
    _write(folder / "cni" / "10-lakehouse-node.conflist", json.dumps(cni_conflist(settings), indent=2))
    _write(folder / "kubelet.yaml", yaml.safe_dump(kubelet_config(settings)))
    _write(folder / "kube-proxy.yaml", yaml.safe_dump(kube_proxy_config(settings)))
    _write(folder / "Corefile", corefile(settings))
    # Pods with dnsPolicy Default get the node's resolver: the node has no other than CoreDNS.
    _write(folder / "resolv.conf", f"nameserver {settings.dns_ip}\n")
    _write(folder / "coredns-rbac.yaml", yaml.safe_dump_all(COREDNS_RBAC))
    _write(folder / "storage.yaml", yaml.safe_dump_all(storage(settings)))
    for index in range(VOLUMES):
        volume = volume_dir(settings, index)
        volume.mkdir(parents=True, exist_ok=True)
        volume.chmod(0o777)  # pods run as their own users (999, 1001, 10001): fsGroup does not reach host folders
    return folder
