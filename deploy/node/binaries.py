"""The node's Go binaries, built once from the Go module proxy into ``.tools/node/bin``.

Each folder of ``go/`` is a small module that pins one upstream release; its ``go.sum``
pins every module it builds from, so the go command refuses a download whose hash differs.
A build is skipped while its binaries exist and a stamp of its go.mod and go.sum matches.
The first build takes about a quarter of an hour on two cores (kube-apiserver alone is most
of it) and ~3 GB of module cache; later ones take nothing.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from deploy.node.settings import KUBERNETES_VERSION, NodeSettings
from lakehouse.errors import LakehouseError

GO_DIR = Path(__file__).resolve().parent / "go"
_VERSION_PACKAGE = "k8s.io/component-base/version"


class BuildError(LakehouseError):
    """A binary could not be built; the message names the module and the log."""


@dataclass(frozen=True)
class GoBuild:
    """One wrapper module and the commands it builds."""

    module: str
    packages: tuple[str, ...]
    ldflags: str = "-s -w"
    renamed: tuple[tuple[str, str], ...] = ()
    """(built, wanted) names, for a command whose folder name is not the binary's usual name."""

    @property
    def folder(self) -> Path:
        return GO_DIR / self.module

    @property
    def outputs(self) -> list[str]:
        """The binary names: the last element of each package path (of the module's path for ``.``)."""
        names = dict(self.renamed)
        built = [self.module if package == "." else package.rsplit("/", 1)[-1] for package in self.packages]
        return [names.get(name, name) for name in built]

    def stamp(self) -> str:
        digest = hashlib.sha256(self.ldflags.encode())
        for name in ("go.mod", "go.sum"):
            digest.update((self.folder / name).read_bytes())
        return digest.hexdigest()[:16]


_KUBERNETES_LDFLAGS = " ".join(
    ["-s -w"]
    + [
        f"-X {_VERSION_PACKAGE}.{key}={value}"
        for key, value in {
            "gitVersion": KUBERNETES_VERSION,
            "gitMajor": KUBERNETES_VERSION.split(".")[0].lstrip("v"),
            "gitMinor": KUBERNETES_VERSION.split(".")[1],
            "gitTreeState": "clean",
        }.items()
    ]
)

BUILDS = (
    GoBuild(
        "kubernetes",
        tuple(
            f"k8s.io/kubernetes/cmd/{name}"
            for name in ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet", "kube-proxy")
        ),
        _KUBERNETES_LDFLAGS,  # the version every component reports (helm checks a chart's kubeVersion with it)
    ),
    GoBuild("etcd", (".",)),
    GoBuild("coredns", (".",)),
    GoBuild("helm", ("helm.sh/helm/v3/cmd/helm",)),
    GoBuild("spark-operator", ("github.com/kubeflow/spark-operator/v2/cmd/operator",), renamed=(("operator", "spark-operator"),)),
    GoBuild("prometheus", ("github.com/prometheus/prometheus/cmd/prometheus",)),
)


def missing(settings: NodeSettings) -> list[GoBuild]:
    """The builds whose binaries are absent or were built from other pins."""
    bin_dir = settings.bin_dir
    return [
        build
        for build in BUILDS
        if not all((bin_dir / name).is_file() for name in build.outputs)
        or not (bin_dir / f".{build.module}.stamp").is_file()
        or (bin_dir / f".{build.module}.stamp").read_text() != build.stamp()
    ]


def ensure_built(settings: NodeSettings, say=print) -> None:
    """Build what is missing, one module at a time, at low priority; each build's output goes to a log."""
    todo = missing(settings)
    if not todo:
        return
    go = shutil.which("go")
    if go is None:
        raise BuildError("the go command is not on PATH: install Go 1.23 or newer (https://go.dev/doc/install)")
    settings.bin_dir.mkdir(parents=True, exist_ok=True)
    logs = settings.run_dir / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    for build in todo:
        log = logs / f"build-{build.module}.log"
        say(f"  building {', '.join(build.outputs)} from the Go module proxy (once; log: {log})")
        started = time.monotonic()
        with log.open("w") as out:
            result = subprocess.run(
                ["nice", "-n", "19", go, "build", "-mod=readonly", "-trimpath", f"-ldflags={build.ldflags}",
                 "-o", f"{settings.bin_dir}/", *build.packages],
                cwd=build.folder, stdout=out, stderr=subprocess.STDOUT,
                env={**os.environ, "GOFLAGS": "-buildvcs=false"},
            )  # fmt: skip
        if result.returncode != 0:
            tail = log.read_text().strip().splitlines()[-5:]
            raise BuildError(
                f"building {build.module} failed (exit {result.returncode}); last lines of {log}:\n  "
                + "\n  ".join(tail)
                + "\nA refused or unreachable module is named there: check GOPROXY (the Go module proxy) and retry."
            )
        for built, wanted in build.renamed:
            (settings.bin_dir / built).replace(settings.bin_dir / wanted)
        (settings.bin_dir / f".{build.module}.stamp").write_text(build.stamp())
        say(f"  built {build.module} in {time.monotonic() - started:.0f} s")


def module_folder(module: str, inside: str = "") -> Path:
    """Where the go command unpacked the upstream module a wrapper requires (its chart, say)."""
    listed = subprocess.run(
        ["go", "list", "-m", "-f", "{{.Dir}}", _required(module)], cwd=GO_DIR / module, capture_output=True, text=True
    )
    if listed.returncode != 0 or not listed.stdout.strip():
        raise BuildError(f"the {module} module is not downloaded: {listed.stderr.strip()} (run `make up-node`)")
    return Path(listed.stdout.strip()) / inside


def _required(module: str) -> str:
    for line in (GO_DIR / module / "go.mod").read_text().splitlines():
        if line.startswith("require "):
            return line.split()[1]
    raise BuildError(f"{GO_DIR / module / 'go.mod'} requires nothing")
