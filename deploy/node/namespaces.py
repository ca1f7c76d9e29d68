"""The node's own network and mount namespaces, and the host's network as a fingerprint.

The network namespace holds the node's address (on a bridge device inside it; the kernel here
has no ``dummy`` module), the pods' links, the route to the service range and every iptables
rule kube-proxy and the kubelet write. The mount namespace holds every mount the kubelet and
containerd make (pod volumes, container root filesystems); it shows the kubelet the kernel
settings it insists on (``KUBELET_SYSCTLS``), where the host holds other values, as files bound
over those in ``/proc/sys``, so it never writes the host's; and the folders where containerd,
its shims, runc and CNI keep state at fixed host paths (``PRIVATE_PATHS``) are folders of the
node's run directory bound there, so nothing of the node is left in the host's ``/run`` or
``/var/lib``. Every node process enters both with ``nsenter``.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

from deploy.node.settings import NodeSettings
from lakehouse.errors import LakehouseError

BRIDGE = "lhnode0"
# What the kubelet insists on (pkg/kubelet/cm setupKernelTunables; with protectKernelDefaults it refuses to
# start on another value): each the host holds otherwise is shown to it through a bound file.
KUBELET_SYSCTLS = {"vm/overcommit_memory": "1", "vm/panic_on_oom": "0", "kernel/panic": "10",
                   "kernel/panic_on_oops": "1", "kernel/keys/root_maxkeys": "1000000",
                   "kernel/keys/root_maxbytes": "25000000"}
#: host paths the runtime writes whatever its configuration says (containerd 1.6's shim sockets in
#: /run/containerd/s, runc's state in /run/containerd/runc, libcni's result cache in /var/lib/cni),
#: and the folder of the run directory shown there inside the mount namespace
PRIVATE_PATHS = {"/run/containerd": "run-containerd", "/var/lib/cni": "var-lib-cni"}


class NamespaceError(LakehouseError):
    """A namespace could not be made or removed; the message says which command failed."""


def _run(*command: str) -> str:
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        raise NamespaceError(
            f"`{' '.join(command)}` failed: {result.stderr.strip() or result.stdout.strip()}\n"
            "The node needs root (CAP_SYS_ADMIN, CAP_NET_ADMIN) and the iproute2 and util-linux tools."
        )
    return result.stdout


def enter(settings: NodeSettings) -> list[str]:
    """The prefix that runs a command inside the node's network and mount namespaces, in this directory
    (entering a mount namespace would otherwise start it at ``/``)."""
    return ["nsenter", f"--net={settings.netns_path}", f"--mount={settings.mount_ns_path}", f"--wd={os.getcwd()}", "--"]


def netns_exists(settings: NodeSettings) -> bool:
    return settings.netns_path.exists()


def mount_ns_exists(settings: NodeSettings) -> bool:
    return settings.mount_ns_path.exists() and _is_mount_point(settings.mount_ns_path)


def _is_mount_point(path: Path) -> bool:
    target = str(path.resolve())
    return any(line.split()[4] == target for line in Path("/proc/self/mountinfo").read_text().splitlines())


def create(settings: NodeSettings) -> None:
    """Both namespaces, idempotently: the bridge with the node's address, the service route, forwarding on."""
    if not netns_exists(settings):
        _run("ip", "netns", "add", settings.name)
    ns = ("ip", "-n", settings.name)
    links = _run(*ns, "-o", "link")
    if f": {BRIDGE}:" not in links:
        _run(*ns, "link", "add", BRIDGE, "type", "bridge")
    if str(settings.address) not in _run(*ns, "-o", "addr", "show", "dev", BRIDGE):
        _run(*ns, "addr", "add", str(settings.address), "dev", BRIDGE)
    _run(*ns, "link", "set", "lo", "up")
    _run(*ns, "link", "set", BRIDGE, "up")
    # The node's own processes dial Service addresses (kube-proxy rewrites them): the kernel needs a
    # route to look up before the rewrite. Pods route through their veth pair to the node anyway.
    _run(*ns, "route", "replace", str(settings.service_cidr), "dev", BRIDGE)
    _run("nsenter", f"--net={settings.netns_path}", "sysctl", "-q", "-w", "net.ipv4.ip_forward=1")
    if not mount_ns_exists(settings):
        _create_mount_ns(settings)


def _create_mount_ns(settings: NodeSettings) -> None:
    folder = settings.mount_ns_path.parent
    folder.mkdir(parents=True, exist_ok=True)
    # A namespace file can be bound only onto a mount that does not propagate: make the folder one.
    if not _is_mount_point(folder):
        _run("mount", "--bind", str(folder), str(folder))
    _run("mount", "--make-private", str(folder))
    settings.mount_ns_path.touch()
    binds = []
    for name, wanted in KUBELET_SYSCTLS.items():
        if Path("/proc/sys", name).read_text().strip() != wanted:
            shown = folder / name.replace("/", ".")
            shown.write_text(wanted + "\n")
            binds.append(f"mount --bind {shown} /proc/sys/{name}")
    for host_path, name in PRIVATE_PATHS.items():
        private = _private_folder(settings, name)
        private.mkdir(parents=True, exist_ok=True)
        Path(host_path).mkdir(parents=True, exist_ok=True)  # the mount point (an empty folder where none was)
        binds.append(f"mount --bind {private} {host_path}")
    script = " && ".join(["mount --make-rprivate /"] + binds)
    _run("unshare", f"--mount={settings.mount_ns_path}", "--propagation", "private", "sh", "-c", script)


def _private_folder(settings: NodeSettings, name: str) -> Path:
    return settings.run_dir / "private" / name


def remove(settings: NodeSettings) -> None:
    """Both namespaces; call once no process of the node is left in them. The runtime state shown at
    ``PRIVATE_PATHS`` goes with them (as ``/run`` would at a reboot); so does the mount ``ip netns``
    makes of ``/run/netns`` when no namespace is left in it."""
    if _is_mount_point(settings.mount_ns_path):
        _run("umount", str(settings.mount_ns_path))
    folder = settings.mount_ns_path.parent
    if folder.exists() and _is_mount_point(folder):
        _run("umount", str(folder))
    if netns_exists(settings):
        _run("ip", "netns", "delete", settings.name)
    netns_folder = settings.netns_path.parent
    if netns_folder.is_dir() and not any(netns_folder.iterdir()) and _is_mount_point(netns_folder):
        subprocess.run(["umount", str(netns_folder)], capture_output=True)  # best effort: busy, it stays
    for name in PRIVATE_PATHS.values():
        shutil.rmtree(_private_folder(settings, name), ignore_errors=True)


_COUNTERS = re.compile(r"\[\d+:\d+\]")


def host_network() -> dict[str, list[str]]:
    """The host's links, addresses, routes and firewall rules, normalised so two readings compare equal.

    Counters, timestamps and link statistics are dropped; everything a change to the network
    would touch is kept.
    """
    readings = {
        "links": ["ip", "-o", "link", "show"],
        "addresses": ["ip", "-o", "addr", "show"],
        "routes": ["ip", "route", "show", "table", "all"],
        "routes6": ["ip", "-6", "route", "show", "table", "all"],
        "iptables": ["iptables-save"],
        "ip6tables": ["ip6tables-save"],
        "netns": ["ip", "netns", "list"],
    }
    out: dict[str, list[str]] = {}
    for name, command in readings.items():
        try:
            text = subprocess.run(command, capture_output=True, text=True, check=False).stdout
        except FileNotFoundError:
            text = f"({command[0]} not installed)"
        lines = [_COUNTERS.sub("", line).rstrip() for line in text.splitlines() if not line.startswith("#")]
        out[name] = sorted(line for line in lines if line)
    return out
