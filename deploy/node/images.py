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
from dataclasses import dataclass
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
    # Commands run through `python -m deploy.node exec` find this client first: a newer one on PATH
    # builds only through buildx, which Debian's engine does not ship.
    link = settings.bin_dir / "docker"
    if not link.is_symlink():
        settings.bin_dir.mkdir(parents=True, exist_ok=True)
        link.symlink_to(DOCKER)
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
         "--storage-driver=overlay2", "--log-level=warn",
         f"--cgroup-parent={settings.cgroup_root}/docker"],
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


def host_certificates() -> list[Path]:
    """The certificate authorities this machine adds to Debian's (a TLS-inspecting proxy's, say)."""
    folder = Path("/usr/local/share/ca-certificates")
    return sorted(folder.rglob("*.crt")) if folder.is_dir() else []


def debian_image(settings: NodeSettings, name: str, packages: tuple[str, ...] = (), say=print) -> str:
    """A Debian 12 image of ``packages`` (debootstrap minbase), tagged by its package list.

    An image with ``ca-certificates`` also trusts the authorities the host adds to Debian's
    (``host_certificates``): its build steps then reach the registries the way the host does,
    behind the same proxy, and its programs find them through ``SSL_CERT_FILE``.
    """
    certificates = host_certificates() if "ca-certificates" in packages else []
    digest = hashlib.sha256(" ".join(sorted(packages)).encode())
    for certificate in certificates:
        digest.update(certificate.read_bytes())
    image = f"lakehouse.local/{name}:{SUITE}-{digest.hexdigest()[:12]}"
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
        changes = []
        if certificates:
            for certificate in certificates:
                shutil.copy2(certificate, Path(rootfs, "usr/local/share/ca-certificates", certificate.name))
            updated = subprocess.run(["chroot", rootfs, "update-ca-certificates"], capture_output=True, text=True)
            if updated.returncode != 0:
                raise ImageError(f"update-ca-certificates in {image} failed: {updated.stderr.strip()}")
            changes.append("ENV SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt")
        for cache in ("var/cache/apt/archives", "var/lib/apt/lists"):
            shutil.rmtree(Path(rootfs, cache), ignore_errors=True)
        _import(settings, rootfs, image, *changes)
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


def _reference(image: str) -> str:
    """The name containerd gives an image Docker calls ``image`` (Docker Hub's defaults spelled out)."""
    first = image.split("/", 1)[0]
    if "/" not in image:
        return f"docker.io/library/{image}"
    return image if "." in first or ":" in first or first == "localhost" else f"docker.io/{image}"


def load(settings: NodeSettings, image: str, say=print) -> None:
    """Hand an image from the Docker engine to the node's containerd (what ``kind load`` does on kind),
    unless containerd has it already; then drop the engine's older tags of that image (disk)."""
    listed = subprocess.run(
        ["ctr", f"--address={settings.containerd_socket}", "--namespace=k8s.io", "images", "ls", "-q"],
        capture_output=True, text=True,
    )  # fmt: skip
    if _reference(image) in listed.stdout.split():
        return
    say(f"  loading {image} into the node")
    save = subprocess.Popen([DOCKER, "save", image], stdout=subprocess.PIPE, env=_env(settings))
    loaded = subprocess.run(
        ["ctr", f"--address={settings.containerd_socket}", "--namespace=k8s.io", "images", "import", "-"],
        stdin=save.stdout, capture_output=True, text=True,
    )  # fmt: skip
    save.wait()
    if loaded.returncode != 0 or save.returncode != 0:
        raise ImageError(f"loading {image} into the node failed: {loaded.stderr.strip()}")
    repository = image.rsplit(":", 1)[0]
    tags = docker(settings, "images", repository, "--format", "{{.Repository}}:{{.Tag}}", capture_output=True, text=True)
    older = [tag for tag in tags.stdout.split() if tag != image]
    if older:
        docker(settings, "rmi", *older, capture_output=True)
        docker(settings, "image", "prune", "--force", capture_output=True)


def _env(settings: NodeSettings) -> dict[str, str]:
    return {**os.environ, **docker_env(settings)}


# Stand-ins for the base images deploy/Dockerfile and deploy/k8s/spark-operator.Dockerfile name, which
# no reachable registry ships; each is built from Debian, PyPI or the Go module proxy.
BUILD_PACKAGES = ("openjdk-17-jdk-headless", "maven", "gcc", "libc6-dev", "python3", "python3-venv", "ca-certificates")
SPARK_PACKAGES = ("openjdk-17-jre-headless", "python3", "python3-venv", "tini", "procps", "ca-certificates")
_IMAGE_LOCK = _HERE.parent / "image-requirements.lock"


def _requirement(name: str) -> str:
    """``name==version --hash=sha256:...`` as the image's lock pins it."""
    lines = _IMAGE_LOCK.read_text().splitlines()
    for index, line in enumerate(lines):
        if line.startswith(f"{name}=="):
            pin = line.split()[0]
            hashes = [h.strip().rstrip("\\").strip() for h in lines[index + 1 :] if h.strip().startswith("--hash")]
            return " ".join([pin, *hashes[:1]]) if hashes else pin
    raise ImageError(f"{name} is not pinned in {_IMAGE_LOCK}")


def _content_tag(*parts: bytes | str) -> str:
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part.encode() if isinstance(part, str) else part)
    return digest.hexdigest()[:12]


def build(settings: NodeSettings, dockerfile: Path, context: Path, image: str, args: dict[str, str], say=print) -> str:
    """``docker build`` on the node's engine, build steps on the host's network; the log under logs/."""
    if has_image(settings, image):
        return image
    say(f"  building {image} ({dockerfile.name})")
    log = settings.run_dir / "logs" / f"build-{image.split('/')[-1].replace(':', '-')}.log"
    with log.open("w") as out:
        built = docker(
            settings, "build", "--network=host", "--progress=plain", "-f", str(dockerfile), "-t", image,
            *[arg for key, value in args.items() for arg in ("--build-arg", f"{key}={value}")], str(context),
            stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
    if built.returncode != 0:
        tail = log.read_text(errors="replace").strip().splitlines()[-6:]
        raise ImageError(f"building {image} failed; last lines of {log}:\n  " + "\n  ".join(tail))
    return image


def spark_image(settings: NodeSettings, say=print) -> str:
    """The stand-in for Apache Spark's image (``spark.Dockerfile``)."""
    base = debian_image(settings, "spark-base", SPARK_PACKAGES, say)
    requirement = _requirement("pyspark")
    version = requirement.split()[0].split("==")[1]
    files = [(_HERE / name).read_bytes() for name in ("spark.Dockerfile", "spark-entrypoint.sh", "spark-decommission.sh")]
    image = f"lakehouse.local/spark:{version}-{_content_tag(base, requirement, *files)}"
    args = {"BASE_IMAGE": base, "PYSPARK_REQUIREMENT": requirement}
    return build(settings, _HERE / "spark.Dockerfile", _HERE, image, args, say)


def one_file_image(settings: NodeSettings, name: str, source: Path, target: str) -> str:
    """An image holding one file (a binary taken from PyPI or built from the Go module proxy), for a
    Dockerfile's ``COPY --from``."""
    image = f"lakehouse.local/{name}:{_content_tag(source.read_bytes())}"
    if has_image(settings, image):
        return image
    with tempfile.TemporaryDirectory(dir=settings.run_dir) as rootfs:
        placed = Path(rootfs, target.lstrip("/"))
        placed.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, placed)
        _import(settings, rootfs, image)
    return image


def base_image_args(settings: NodeSettings, say=print) -> dict[str, str]:
    """The build arguments that put deploy/Dockerfile on the stand-ins."""
    uv = shutil.which("uv", path=str(_HERE.parents[1] / ".venv" / "bin"))
    if uv is None:
        raise ImageError("the project's venv has no uv: run `make install`")
    return {
        "BUILD_IMAGE": debian_image(settings, "build", BUILD_PACKAGES, say),
        "UV_IMAGE": one_file_image(settings, "uv", Path(uv), "/uv"),
        "SPARK_IMAGE": spark_image(settings, say),
    }


def operator_image_args(settings: NodeSettings, say=print) -> dict[str, str]:
    """The build arguments that put deploy/k8s/spark-operator.Dockerfile on the stand-ins."""
    binary = settings.bin_dir / "spark-operator"
    return {
        "OPERATOR_IMAGE": one_file_image(settings, "spark-operator-binary", binary, "/usr/bin/spark-operator"),
        "SPARK_IMAGE": spark_image(settings, say),
    }


@dataclass(frozen=True)
class Standin:
    """An image built here for one the cluster names but no reachable registry ships."""

    replaces: str
    """The image the manifests name (what a kind cluster pulls)."""
    packages: tuple[str, ...]
    """Debian packages of its base, beyond minbase."""
    files: tuple[tuple[str, str], ...] = ()
    """(path in the build context, source relative to the project): the pinned downloads it copies."""
    base: str = ""
    """The base's name, when it is another image's (the same packages make the same base); else its own."""


STANDINS = {
    "postgres": Standin("postgres:16.6", ("postgresql-15",)),
    "mysql": Standin("mysql:8.4.3", ("mariadb-server", "mariadb-client")),
    "minio": Standin("quay.io/minio/minio", (), (("weed", ".tools/bin/weed"),), base="debian"),
    "kafka": Standin("Strimzi's Kafka 4.3.1", SPARK_PACKAGES, (("libs", ".tools/jvm/kafka"),), base="spark-base"),
    "trino": Standin(
        "trinodb/trino:476",
        ("python3", "python3-venv", "curl", "ca-certificates"),
        (
            ("trino-server-core-476.tar.gz", ".tools/jvm/trino/trino-server-core-476.tar.gz"),
            ("trino-iceberg-476.zip", ".tools/jvm/trino/trino-iceberg-476.zip"),
            ("trino", ".tools/jvm/trino/trino-cli-476-executable.jar"),
        ),
    ),  # fmt: skip
    "prometheus": Standin("prom/prometheus:v2.55.1", (), (("prometheus", ".tools/node/bin/prometheus"),), base="debian"),
}


def standin_image(settings: NodeSettings, name: str, say=print) -> str:
    """Build the stand-in ``name`` (``standins/<name>.Dockerfile`` and its scripts), tagged by its content."""
    standin = STANDINS[name]
    project = _HERE.parents[1]
    base = debian_image(settings, standin.base or f"{name}-base", standin.packages, say)
    folder = _HERE / "standins"
    own = sorted(p for p in folder.iterdir() if p.name.startswith(f"{name}.") or p.name.startswith(f"{name}-")
                 or (name == "trino" and p.name == "run-trino"))  # fmt: skip
    sources = [(target, project / source) for target, source in standin.files]
    for _, source in sources:
        if not source.exists():
            raise ImageError(f"{source} is missing: run `make install` (and `make up-node` for the Go binaries)")
    digest = hashlib.sha256(base.encode())
    for path in own + [p for _, s in sources for p in (sorted(s.iterdir()) if s.is_dir() else [s])]:
        digest.update(path.name.encode() + path.read_bytes())
    image = f"lakehouse.local/{name}:{digest.hexdigest()[:12]}"
    if has_image(settings, image):
        return image
    with tempfile.TemporaryDirectory(dir=settings.run_dir) as context:
        for path in own:
            shutil.copy2(path, context)
        for target, source in sources:
            if source.is_dir():
                shutil.copytree(source, Path(context, target))
            else:
                shutil.copy2(source, Path(context, target))
        return build(settings, Path(context, f"{name}.Dockerfile"), Path(context), image, {"BASE_IMAGE": base}, say)
