"""Images for the node, made here from registry packages, and how they reach its containerd.

No container registry is reachable, so nothing is pulled: a Docker engine of the node's own
(Debian's ``docker.io``; own socket, data and state under ``<run_dir>/docker``; no bridge, no
iptables rules, no forwarding: it changes nothing of the host's network) builds images from
Debian root filesystems made by ``debootstrap`` and from the project's Dockerfiles, and
``docker save`` hands them to the node's containerd. Build steps use the host's network
(``--network host``) to reach the package registries, as ``make install`` does.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from deploy.local import processes
from deploy.node.configs import PAUSE_IMAGE
from deploy.node.settings import NodeSettings
from lakehouse.errors import LakehouseError

DOCKER = "/usr/bin/docker"  # Debian's client, the engine's own version (a newer client on PATH may lack buildx)
DEBIAN_MIRROR = "http://deb.debian.org/debian"
SUITE = "bookworm"
_HERE = Path(__file__).resolve().parent


class ImageError(LakehouseError):
    """An image could not be made or loaded; the message names the step and its log."""


def docker_socket(settings: NodeSettings) -> Path:
    return settings.run_dir / "docker" / "docker.sock"


def docker_env(settings: NodeSettings) -> dict[str, str]:
    return {"DOCKER_HOST": f"unix://{docker_socket(settings)}", "DOCKER_BUILDKIT": "1"}


def docker(settings: NodeSettings, *args: str, **run) -> subprocess.CompletedProcess:
    return subprocess.run([DOCKER, *args], env=_env(settings), **run)


def start_docker(settings: NodeSettings, say=print) -> None:
    """The node's Docker engine, unless it runs already."""
    record = processes.read_record(settings.run_dir, "dockerd")
    if record is not None and record.process() is not None:
        return
    root = settings.run_dir / "docker"
    root.mkdir(parents=True, exist_ok=True)
    say("  starting the node's Docker engine (image builds)")
    processes.spawn(
        "dockerd",
        ["dockerd", f"--host=unix://{docker_socket(settings)}", f"--data-root={root / 'data'}",
         f"--exec-root={root / 'exec'}", f"--pidfile={root / 'dockerd.pid'}", "--bridge=none", "--iptables=false",
         "--ip6tables=false", "--ip-masq=false", "--ip-forward=false", "--userland-proxy=false",
         "--storage-driver=overlay2", "--log-level=warn"],
        settings.run_dir / "logs" / "dockerd.log", settings.run_dir,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while docker(settings, "version", capture_output=True).returncode != 0:
        if time.monotonic() > deadline:
            raise ImageError(f"dockerd did not answer within 60 s: see {settings.run_dir / 'logs' / 'dockerd.log'}")
        time.sleep(0.5)


def stop_docker(settings: NodeSettings) -> None:
    record = processes.read_record(settings.run_dir, "dockerd")
    if record is not None:
        processes.stop(record, timeout=30)
        processes.forget(settings.run_dir, "dockerd")


def has_image(settings: NodeSettings, name: str) -> bool:
    return docker(settings, "image", "inspect", name, capture_output=True).returncode == 0


def debian_image(settings: NodeSettings, name: str, packages: tuple[str, ...] = (), say=print) -> str:
    """A Debian 12 image of ``packages`` (debootstrap minbase), tagged by its package list."""
    tag = hashlib.sha256(" ".join(sorted(packages)).encode()).hexdigest()[:12]
    image = f"lakehouse.local/{name}:{SUITE}-{tag}"
    if has_image(settings, image):
        return image
    say(f"  making {image} with debootstrap ({len(packages)} packages beyond minbase)")
    log = settings.run_dir / "logs" / f"debootstrap-{name}.log"
    with tempfile.TemporaryDirectory(dir=settings.run_dir) as rootfs:
        command = ["debootstrap", "--variant=minbase"]
        if packages:
            command.append(f"--include={','.join(packages)}")
        with log.open("w") as out:
            made = subprocess.run([*command, SUITE, rootfs, DEBIAN_MIRROR], stdout=out, stderr=subprocess.STDOUT)
        if made.returncode != 0:
            raise ImageError(f"debootstrap failed (exit {made.returncode}): see {log}; is {DEBIAN_MIRROR} reachable?")
        for cache in ("var/cache/apt/archives", "var/lib/apt/lists"):
            shutil.rmtree(Path(rootfs, cache), ignore_errors=True)
        _import(settings, rootfs, image)
    return image


def _import(settings: NodeSettings, rootfs: str, image: str, *changes: str) -> None:
    tar = subprocess.Popen(["tar", "-C", rootfs, "-c", "."], stdout=subprocess.PIPE)
    imported = docker(
        settings, "import", *[arg for change in changes for arg in ("--change", change)], "-", image,
        stdin=tar.stdout, capture_output=True, text=True,
    )  # fmt: skip
    tar.wait()
    if imported.returncode != 0 or tar.returncode != 0:
        raise ImageError(f"docker import of {image} failed: {imported.stderr.strip()}")


def pause_image(settings: NodeSettings) -> str:
    """The sandbox image: one static binary (``pause.c``)."""
    if has_image(settings, PAUSE_IMAGE):
        return PAUSE_IMAGE
    with tempfile.TemporaryDirectory(dir=settings.run_dir) as rootfs:
        built = subprocess.run(
            ["gcc", "-static", "-O2", "-o", f"{rootfs}/pause", str(_HERE / "pause.c")], capture_output=True, text=True
        )
        if built.returncode != 0:
            raise ImageError(f"compiling pause.c failed (gcc and libc6-dev are needed): {built.stderr.strip()}")
        _import(settings, rootfs, PAUSE_IMAGE, 'ENTRYPOINT ["/pause"]', "USER 65535:65535")
    return PAUSE_IMAGE


def load(settings: NodeSettings, image: str, say=print) -> None:
    """Hand an image from the Docker engine to the node's containerd (what ``kind load`` does on kind)."""
    say(f"  loading {image} into the node")
    save = subprocess.Popen([DOCKER, "save", image], stdout=subprocess.PIPE, env=_env(settings))
    loaded = subprocess.run(
        ["ctr", f"--address={settings.containerd_socket}", "--namespace=k8s.io", "images", "import", "-"],
        stdin=save.stdout, capture_output=True, text=True,
    )  # fmt: skip
    save.wait()
    if loaded.returncode != 0 or save.returncode != 0:
        raise ImageError(f"loading {image} into the node failed: {loaded.stderr.strip()}")


def _env(settings: NodeSettings) -> dict[str, str]:
    return {**os.environ, **docker_env(settings)}
