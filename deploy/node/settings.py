"""Where the node lives: its namespaces, addresses, ranges and folders, declared once.

Override any field from the environment with ``LAKEHOUSE_NODE__``, e.g.
``LAKEHOUSE_NODE__POD_CIDR=10.245.0.0/24``. Every address is inside the node's own network
namespace, so none of them can collide with the host's or reach beyond the machine.
"""

from __future__ import annotations

from ipaddress import IPv4Address, IPv4Interface, IPv4Network
from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from lakehouse.settings import REPO_ROOT

KUBERNETES_VERSION = "v1.32.13"  # deploy/node/go/kubernetes/go.mod requires this release


class NodeSettings(BaseSettings):
    """The one-node cluster's layout."""

    model_config = SettingsConfigDict(env_prefix="LAKEHOUSE_NODE__", extra="forbid")

    name: str = Field("lakehouse-node", pattern=r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
    """The node's name, its network namespace's and its kubeconfig context's."""
    address: IPv4Interface = IPv4Interface("10.250.0.2/24")
    """The node's IP on a bridge inside its namespace (the kubelet needs one that is not loopback)."""
    pod_cidr: IPv4Network = IPv4Network("10.244.0.0/24")
    service_cidr: IPv4Network = IPv4Network("10.96.0.0/16")
    cluster_domain: str = "cluster.local"
    run_dir: Path = REPO_ROOT / ".run" / "node"
    """Certificates, configurations, logs, etcd's data, containerd's images and the pods' volumes."""
    tools_dir: Path = REPO_ROOT / ".tools" / "node"
    """The Go binaries (``bin/``), built once."""

    @property
    def node_ip(self) -> IPv4Address:
        return self.address.ip

    @property
    def api_service_ip(self) -> IPv4Address:
        """The ``kubernetes`` Service's address: the first of the service range."""
        return self.service_cidr.network_address + 1

    @property
    def dns_ip(self) -> IPv4Address:
        """Where pods ask for names: CoreDNS listens on the node's address."""
        return self.node_ip

    @property
    def netns_path(self) -> Path:
        return Path("/run/netns") / self.name

    @property
    def mount_ns_path(self) -> Path:
        return self.run_dir / "ns" / "mnt"

    @property
    def bin_dir(self) -> Path:
        return self.tools_dir / "bin"

    @property
    def admin_kubeconfig(self) -> Path:
        return self.run_dir / "pki" / "admin.kubeconfig"

    @property
    def cgroup_root(self) -> str:
        """The cgroup under which the kubelet puts its pods and the node's Docker engine its builds, on every
        controller: removing the node's cgroups never touches anyone else's."""
        return f"/{self.name}"

    @property
    def containerd_socket(self) -> Path:
        return self.run_dir / "containerd" / "containerd.sock"
