"""Start the node's components in order, wait for each, and stop them again.

``up`` builds what is missing (binaries, certificates, configurations, namespaces), then starts
containerd, etcd, the API server, the controller manager, the scheduler, the kubelet, kube-proxy
and CoreDNS, each as a process of ours (pid recorded as the local stack records its servers)
inside the node's namespaces, and returns once the node is Ready. ``down`` stops them in the
reverse order, and first every container the kubelet started, so nothing of the node outlives it.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import psutil

from deploy.local import processes
from deploy.node import binaries, configs, images, namespaces, pki
from deploy.node.settings import NodeSettings
from lakehouse.errors import LakehouseError


class NodeError(LakehouseError):
    """The node could not start or stop; the message names the component and its log."""


@dataclass(frozen=True)
class Component:
    """A process of the node: how it starts and how to tell it is ready."""

    name: str
    command: Callable[[NodeSettings], list[str]]
    probe: Callable[[NodeSettings], bool]
    timeout_s: float = 60.0


def _bin(settings: NodeSettings, name: str) -> str:
    return str(settings.bin_dir / name)


def inside(settings: NodeSettings, command: list[str], timeout: float = 10.0) -> subprocess.CompletedProcess:
    """Run a short command inside the node's namespaces (a probe, kubectl, ctr)."""
    return subprocess.run(namespaces.enter(settings) + command, capture_output=True, text=True, timeout=timeout, check=False)


def _http_ok(url: str) -> Callable[[NodeSettings], bool]:
    def probe(settings: NodeSettings) -> bool:
        try:
            return inside(settings, ["curl", "-skf", "--max-time", "2", url]).returncode == 0
        except subprocess.TimeoutExpired:
            return False

    return probe


def kubectl(settings: NodeSettings, *args: str, timeout: float = 60.0) -> subprocess.CompletedProcess:
    return inside(settings, ["kubectl", f"--kubeconfig={settings.admin_kubeconfig}", *args], timeout=timeout)


def _api_ready(settings: NodeSettings) -> bool:
    try:
        return kubectl(settings, "get", "--raw", "/readyz", timeout=5).returncode == 0
    except subprocess.TimeoutExpired:
        return False


def _containerd_ready(settings: NodeSettings) -> bool:
    return settings.containerd_socket.exists() and ctr(settings, "version").returncode == 0


def ctr(settings: NodeSettings, *args: str, timeout: float = 60.0) -> subprocess.CompletedProcess:
    return inside(settings, ["ctr", f"--address={settings.containerd_socket}", "--namespace=k8s.io", *args], timeout)


def _pki(settings: NodeSettings, name: str) -> str:
    return str(pki.pki_dir(settings) / name)


def _config(settings: NodeSettings, name: str) -> str:
    return str(configs.config_dir(settings) / name)


def _etcd(s: NodeSettings) -> list[str]:
    return [
        _bin(s, "etcd"), "--name=node", f"--data-dir={s.run_dir / 'etcd'}", "--log-level=warn",
        "--listen-client-urls=http://127.0.0.1:2379", "--advertise-client-urls=http://127.0.0.1:2379",
        "--listen-peer-urls=http://127.0.0.1:2380", "--initial-advertise-peer-urls=http://127.0.0.1:2380",
        "--initial-cluster=node=http://127.0.0.1:2380", "--listen-metrics-urls=http://127.0.0.1:2381",
    ]  # fmt: skip


def _apiserver(s: NodeSettings) -> list[str]:
    return [
        _bin(s, "kube-apiserver"), f"--advertise-address={s.node_ip}", "--secure-port=6443",
        "--etcd-servers=http://127.0.0.1:2379", f"--service-cluster-ip-range={s.service_cidr}",
        f"--client-ca-file={_pki(s, 'ca.crt')}",
        f"--tls-cert-file={_pki(s, 'apiserver.crt')}", f"--tls-private-key-file={_pki(s, 'apiserver.key')}",
        f"--kubelet-client-certificate={_pki(s, 'apiserver-kubelet-client.crt')}",
        f"--kubelet-client-key={_pki(s, 'apiserver-kubelet-client.key')}",
        f"--kubelet-certificate-authority={_pki(s, 'ca.crt')}", "--kubelet-preferred-address-types=InternalIP",
        f"--service-account-issuer=https://kubernetes.default.svc.{s.cluster_domain}",
        f"--service-account-key-file={_pki(s, 'sa.pub')}", f"--service-account-signing-key-file={_pki(s, 'sa.key')}",
        "--authorization-mode=Node,RBAC", "--enable-admission-plugins=NodeRestriction", "--allow-privileged=true",
        "--profiling=false",
    ]  # fmt: skip


def _controller_manager(s: NodeSettings) -> list[str]:
    kubeconfig = _pki(s, "controller-manager.kubeconfig")
    return [
        _bin(s, "kube-controller-manager"), f"--kubeconfig={kubeconfig}",
        f"--authentication-kubeconfig={kubeconfig}", f"--authorization-kubeconfig={kubeconfig}",
        "--bind-address=127.0.0.1", "--leader-elect=false", "--use-service-account-credentials=true",
        f"--cluster-signing-cert-file={_pki(s, 'ca.crt')}", f"--cluster-signing-key-file={_pki(s, 'ca.key')}",
        f"--root-ca-file={_pki(s, 'ca.crt')}", f"--service-account-private-key-file={_pki(s, 'sa.key')}",
        "--profiling=false",
    ]  # fmt: skip


def _scheduler(s: NodeSettings) -> list[str]:
    kubeconfig = _pki(s, "scheduler.kubeconfig")
    return [
        _bin(s, "kube-scheduler"), f"--kubeconfig={kubeconfig}", f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}", "--bind-address=127.0.0.1", "--leader-elect=false",
        "--profiling=false",
    ]  # fmt: skip


def _kubelet(s: NodeSettings) -> list[str]:
    return [
        _bin(s, "kubelet"), f"--config={_config(s, 'kubelet.yaml')}", f"--kubeconfig={_pki(s, 'kubelet.kubeconfig')}",
        f"--root-dir={s.run_dir / 'kubelet'}", f"--node-ip={s.node_ip}", f"--hostname-override={s.name}",
    ]  # fmt: skip


COMPONENTS = (
    Component("containerd", lambda s: ["containerd", f"--config={_config(s, 'containerd.toml')}"], _containerd_ready),
    Component("etcd", _etcd, _http_ok("http://127.0.0.1:2381/health")),
    Component("kube-apiserver", _apiserver, _api_ready, timeout_s=120),
    Component("kube-controller-manager", _controller_manager, _http_ok("https://127.0.0.1:10257/healthz")),
    Component("kube-scheduler", _scheduler, _http_ok("https://127.0.0.1:10259/healthz")),
    Component("kubelet", _kubelet, _http_ok("http://127.0.0.1:10248/healthz")),
    Component(
        "kube-proxy",
        lambda s: [_bin(s, "kube-proxy"), f"--config={_config(s, 'kube-proxy.yaml')}"],
        _http_ok("http://127.0.0.1:10256/healthz"),
    ),  # fmt: skip
    Component(
        "coredns", lambda s: [_bin(s, "coredns"), "-conf", _config(s, "Corefile")], _http_ok("http://127.0.0.1:8181/ready")
    ),
)


def _log(settings: NodeSettings, name: str) -> Path:
    return settings.run_dir / "logs" / f"{name}.log"


def _wait(settings: NodeSettings, component: Component, record: processes.ProcessRecord) -> None:
    deadline = time.monotonic() + component.timeout_s
    while time.monotonic() < deadline:
        if record.process() is None:
            raise NodeError(_failure(settings, component.name, "exited while starting"))
        if component.probe(settings):
            return
        time.sleep(0.5)
    raise NodeError(_failure(settings, component.name, f"was not ready within {component.timeout_s:.0f} s"))


def _failure(settings: NodeSettings, name: str, what: str) -> str:
    log = _log(settings, name)
    tail = log.read_text(errors="replace").strip().splitlines()[-8:] if log.exists() else []
    return f"{name} {what}; last lines of {log}:\n  " + "\n  ".join(tail) + "\nStop what started with `make down-node`."


def up(settings: NodeSettings, say: Callable[[str], None] = print) -> float:
    """The node, Ready; returns the seconds it took (builds excluded)."""
    binaries.ensure_built(settings, say)
    started = time.monotonic()
    pki.ensure_pki(settings)
    configs.write_all(settings)
    namespaces.create(settings)
    _create_cgroup_root(settings)
    for component in COMPONENTS:
        record = processes.read_record(settings.run_dir, component.name)
        if record is not None and record.process() is not None:
            continue
        say(f"  starting {component.name}")
        record = processes.spawn(
            component.name, namespaces.enter(settings) + component.command(settings),
            _log(settings, component.name), settings.run_dir,
        )  # fmt: skip
        _wait(settings, component, record)
        if component.name == "kube-apiserver":
            applied = kubectl(settings, "apply", "-f", _config(settings, "coredns-rbac.yaml"))
            if applied.returncode != 0:
                raise NodeError(f"granting CoreDNS its reads failed: {applied.stderr.strip()}")
    say("  waiting for the node to be Ready")
    waited = kubectl(settings, "wait", "--for=condition=Ready", f"node/{settings.name}", "--timeout=120s", timeout=130)
    if waited.returncode != 0:
        raise NodeError(_failure(settings, "kubelet", f"did not make the node Ready: {waited.stderr.strip()}"))
    applied = kubectl(settings, "apply", "-f", _config(settings, "storage.yaml"))
    if applied.returncode != 0:
        raise NodeError(f"creating the node's volumes failed: {applied.stderr.strip()}")
    images.start_docker(settings, say)
    images.load(settings, images.pause_image(settings), say)
    return time.monotonic() - started


def _our_shims(settings: NodeSettings) -> list[psutil.Process]:
    """containerd's shims for this node's containers: started by our containerd, re-parented away from it."""
    socket = str(settings.containerd_socket)
    found = []
    for proc in psutil.process_iter(["name", "cmdline"]):
        cmdline = proc.info["cmdline"] or []
        if proc.info["name"] and proc.info["name"].startswith("containerd-shim") and socket in cmdline:
            found.append(proc)
    return found


def _remove_containers(settings: NodeSettings) -> None:
    """Kill every container's processes and delete its task, through our containerd."""
    if not _containerd_ready(settings):
        return
    listed = ctr(settings, "tasks", "ls", "-q")
    for task in listed.stdout.split():
        ctr(settings, "tasks", "kill", "--all", "--signal", "SIGKILL", task)
    for task in listed.stdout.split():
        ctr(settings, "tasks", "delete", "--force", task)


_CGROUPS = Path("/sys/fs/cgroup")


def _cgroup_folders(settings: NodeSettings) -> list[Path]:
    """The node's cgroup root on each mounted controller (cgroup v1: one hierarchy per folder; aliases such
    as ``cpu`` for ``cpu,cpuacct`` are links and left out)."""
    own = settings.cgroup_root.strip("/")
    if not own or "/" in own:  # never the hierarchy's root, never someone else's subtree
        raise NodeError(f"the node's cgroup root {settings.cgroup_root!r} must be one folder name")
    if (_CGROUPS / "cgroup.controllers").exists():
        raise NodeError("this machine runs cgroup v2 alone; the node runs its kubelet on cgroup v1 (cgroupfs)")
    return [c / own for c in sorted(_CGROUPS.iterdir()) if c.is_dir() and not c.is_symlink()]


def _create_cgroup_root(settings: NodeSettings) -> None:
    """The kubelet refuses a cgroup root that does not exist; a new cpuset cgroup has no CPUs or memory
    nodes until given its parent's."""
    for folder in _cgroup_folders(settings):
        folder.mkdir(exist_ok=True)
        for name in ("cpuset.cpus", "cpuset.mems"):
            own, parents = folder / name, folder.parent / name
            if own.exists() and not own.read_text().strip():
                own.write_text(parents.read_text())


def _kill_pod_processes(settings: NodeSettings, say: Callable[[str], None]) -> None:
    """Every process still in the node's pod cgroups: containerd may be down, or have lost a container,
    and a container's processes outlive their shim (they are re-parented, not killed)."""
    top = next((f for f in _cgroup_folders(settings) if f.parent.name == "pids"), None)
    top = top / "kubepods" if top is not None else None
    killed: set[int] = set()
    deadline = time.monotonic() + 10
    while top is not None and top.is_dir() and time.monotonic() < deadline:
        pids: set[int] = set()
        for tasks in top.rglob("cgroup.procs"):
            try:
                pids.update(int(line) for line in tasks.read_text().split())
            except OSError:  # the cgroup went while it was read
                continue
        if not pids:
            break
        for pid in pids - killed:
            try:
                psutil.Process(pid).kill()
            except psutil.Error:
                continue
        killed |= pids
        time.sleep(0.2)  # until they have exited: a cgroup with a process in it cannot be removed
    if killed:
        say(f"  killed {len(killed)} container processes left in {top}")


def _remove_cgroup_root(settings: NodeSettings, say: Callable[[str], None]) -> None:
    """The node's cgroups, deepest first: a cgroup folder goes once no process and no child is left in it."""
    for top in _cgroup_folders(settings):
        if not top.is_dir():
            continue
        folders = sorted((p for p in top.rglob("*") if p.is_dir()), key=lambda p: len(p.parts), reverse=True)
        for folder in [*folders, top]:
            try:
                folder.rmdir()
            except FileNotFoundError:
                pass
            except OSError as exc:
                say(f"  warning: the node's cgroup {folder} stays: {exc.strerror}")


def down(settings: NodeSettings, say: Callable[[str], None] = print) -> None:
    """Every process the node started, by pid, then its namespaces; data stays for the next ``up``."""
    for name in ("kubelet", "kube-proxy", "coredns", "kube-scheduler", "kube-controller-manager"):
        _stop(settings, name, say)
    _remove_containers(settings)
    _kill_pod_processes(settings, say)
    _stop(settings, "containerd", say)
    for shim in _our_shims(settings):
        say(f"  stopping containerd-shim (pid {shim.pid})")
        shim.kill()
    for name in ("kube-apiserver", "etcd"):
        _stop(settings, name, say)
    images.stop_docker(settings)
    _remove_cgroup_root(settings, say)
    namespaces.remove(settings)
    # The pods are gone, so are their addresses.
    ipam = settings.run_dir / "cni" / "ipam"
    for lease in ipam.rglob("*") if ipam.exists() else []:
        if lease.is_file():
            lease.unlink()


def _stop(settings: NodeSettings, name: str, say: Callable[[str], None]) -> None:
    record = processes.read_record(settings.run_dir, name)
    if record is None:
        return
    if processes.stop(record):
        say(f"  stopped {name} (pid {record.pid})")
    processes.forget(settings.run_dir, name)


def status(settings: NodeSettings) -> list[tuple[str, str]]:
    """Each component: running (pid, RSS) or not."""
    rows = []
    for component in COMPONENTS:
        record = processes.read_record(settings.run_dir, component.name)
        rss = processes.rss_mb(record)
        rows.append((component.name, f"pid {record.pid}, {rss:,.0f} MiB" if record and rss is not None else "stopped"))
    return rows
