"""The JVM artifacts of ``deploy/jvm/pom.xml``, resolved from Maven Central and checked by sha256.

Each profile of the build file is one classpath and gets one folder, ``<tools>/jvm/<profile>``.
``mvn dependency:copy-dependencies`` resolves it (transitive dependencies included) into a
scratch folder; every file there must be named in ``deploy/jvm/artifacts.sha256`` with the
same digest, and every file named there must be present, before the folder replaces the
installed one. So a re-published artifact, a changed dependency tree or a half-finished
download stops the install with a message saying which file and what to do; it never reaches
a classpath.

Trino arrives as archives (the server's core and its Iceberg plugin): they are unpacked
into ``<tools>/trino/server`` once their digests are checked.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tarfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from lakehouse.errors import LakehouseError

JVM_DIR = Path(__file__).parent / "jvm"
POM = JVM_DIR / "pom.xml"
LOCK = JVM_DIR / "artifacts.sha256"
#: every profile of the build file, in install order; the image needs only ``spark``
PROFILES = ("spark", "spark-kafka", "kafka", "trino")
#: profiles installed only by the command that needs them (the Flink peer of `make bench-peers`), not by `make install`
ON_DEMAND_PROFILES = ("flink",)
CLUSTER_PROFILES = ("spark",)
TRINO_VERSION = "476"


class ChecksumError(LakehouseError):
    """An artifact does not have its pinned sha256, or the resolved set differs from the lock."""


class ResolveError(LakehouseError):
    """Maven could not resolve a profile (no ``mvn``, Maven Central unreachable, an unknown version)."""


@dataclass(frozen=True)
class Pin:
    profile: str
    filename: str
    sha256: str


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def load_lock(path: Path | None = None) -> list[Pin]:
    """``<sha256>  <profile>/<file>`` per line; ``#`` starts a comment."""
    path = path or LOCK
    pins = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        try:
            digest, name = line.split(None, 1)
            profile, filename = name.strip().split("/", 1)
        except ValueError:
            raise ChecksumError(f"{path}:{number}: expected '<sha256>  <profile>/<file>', got {line!r}") from None
        pins.append(Pin(profile, filename, digest.lower()))
    return pins


def profile_dir(tools_dir: Path, profile: str) -> Path:
    return tools_dir / "jvm" / profile


def pins_of(profile: str, pins: list[Pin] | None = None) -> dict[str, str]:
    return {p.filename: p.sha256 for p in (pins if pins is not None else load_lock()) if p.profile == profile}


def mismatches(folder: Path, expected: dict[str, str]) -> list[str]:
    """What differs between ``folder`` and the pinned files: one readable line per difference."""
    present = {p.name for p in folder.iterdir() if p.is_file()} if folder.is_dir() else set()
    problems = [f"missing {name}" for name in sorted(expected.keys() - present)]
    problems += [f"not in the lock: {name}" for name in sorted(present - expected.keys())]
    for name in sorted(present & expected.keys()):
        actual = sha256_of(folder / name)
        if actual != expected[name]:
            problems.append(f"{name}: expected sha256 {expected[name]}, got {actual}")
    return problems


def installed_ok(tools_dir: Path, profile: str) -> bool:
    expected = pins_of(profile)
    return bool(expected) and not mismatches(profile_dir(tools_dir, profile), expected)


def _mvn() -> str:
    found = shutil.which("mvn")
    if found is None:
        raise ResolveError("mvn (Apache Maven) not found: install Debian's maven package (`apt-get install maven`; "
                           "`make install` does), then re-run `make install`")
    return found


def resolve(profile: str, into: Path, log_path: Path) -> None:
    """Run Maven for one profile into ``into`` (emptied first); its output goes to ``log_path``."""
    shutil.rmtree(into, ignore_errors=True)
    into.mkdir(parents=True)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    command = [_mvn(), "-B", "-q", "-f", str(POM), "-P", profile, "dependency:copy-dependencies",
               "-DincludeScope=runtime", f"-DoutputDirectory={into}"]
    with log_path.open("w") as log:
        done = subprocess.run(command, stdout=log, stderr=subprocess.STDOUT, check=False)
    if done.returncode != 0:
        tail = "\n".join(log_path.read_text(errors="replace").splitlines()[-8:])
        raise ResolveError(
            f"Maven could not resolve profile {profile!r} of {POM} (exit {done.returncode}; log {log_path}):\n{tail}\n"
            "Check that Maven Central (repo.maven.apache.org) is reachable and that every version in the build "
            "file is published, then re-run `make install`.")


def install_profile(profile: str, tools_dir: Path) -> bool:
    """Resolve and verify one profile into ``<tools>/jvm/<profile>``; False when already in place."""
    if installed_ok(tools_dir, profile):
        return False
    target = profile_dir(tools_dir, profile)
    scratch = target.with_name(target.name + ".part")
    resolve(profile, scratch, tools_dir / "logs" / f"mvn-{profile}.log")
    problems = mismatches(scratch, pins_of(profile))
    if problems:
        raise ChecksumError(
            f"the artifacts Maven resolved for profile {profile!r} differ from {LOCK}:\n  " + "\n  ".join(problems[:12])
            + "\nA changed artifact or dependency tree never reaches a classpath. If you changed deploy/jvm/pom.xml on "
              "purpose, review the files, then run `python -m deploy.artifacts --update-lock`; otherwise the registry "
              f"serves something else than was pinned: leave {scratch} for inspection and report it.")
    shutil.rmtree(target, ignore_errors=True)
    os.replace(scratch, target)
    return True


def lock_lines(tools_dir: Path, profiles: tuple[str, ...] = PROFILES + ON_DEMAND_PROFILES) -> list[str]:
    """Fresh lock lines from what Maven resolves now (``--update-lock``): every profile re-resolved."""
    lines = []
    for profile in profiles:
        scratch = profile_dir(tools_dir, profile).with_name(profile + ".lock")
        resolve(profile, scratch, tools_dir / "logs" / f"mvn-{profile}.log")
        lines += [f"{sha256_of(f)}  {profile}/{f.name}" for f in sorted(scratch.iterdir())]
        shutil.rmtree(scratch)
    return lines


# ---------------------------------------------------------------- Trino: archives unpacked once

def trino_home(tools_dir: Path) -> Path:
    """Trino's server folder (``bin/launcher``, ``lib/``, ``plugin/iceberg``)."""
    return tools_dir / "trino" / "server"


def trino_cli_jar(tools_dir: Path) -> Path:
    return profile_dir(tools_dir, "trino") / f"trino-cli-{TRINO_VERSION}-executable.jar"


def unpack_trino(tools_dir: Path) -> bool:
    """Unpack the verified server core and Iceberg plugin; a stamp of their digests makes it idempotent."""
    source = profile_dir(tools_dir, "trino")
    core = source / f"trino-server-core-{TRINO_VERSION}.tar.gz"
    plugin = source / f"trino-iceberg-{TRINO_VERSION}.zip"
    pins = pins_of("trino")
    stamp_text = f"{pins[core.name]} {pins[plugin.name]}\n"
    home = trino_home(tools_dir)
    stamp = home / ".unpacked"
    if stamp.is_file() and stamp.read_text() == stamp_text:
        return False
    scratch = home.with_name("server.part")
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(parents=True)
    with tarfile.open(core) as tar:
        tar.extractall(scratch, filter="tar")
    (top,) = list(scratch.iterdir())  # trino-server-core-<version>/
    with zipfile.ZipFile(plugin) as zf:
        zf.extractall(scratch / "plugin-zip")
    (plugin_top,) = list((scratch / "plugin-zip").iterdir())  # trino-iceberg-<version>/
    os.replace(plugin_top, top / "plugin" / "iceberg")
    (top / ".unpacked").write_text(stamp_text)
    shutil.rmtree(home, ignore_errors=True)
    os.replace(top, home)
    shutil.rmtree(scratch)
    return True
