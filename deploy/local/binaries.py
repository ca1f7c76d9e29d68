"""Where the local stack finds each server program, with install hints when one is missing."""

from __future__ import annotations

import glob
import os
import shutil
from pathlib import Path

from deploy.local.processes import StackError

_DEBIAN_HINT = "run `make install` (it installs the missing Debian package {pkg})"


def system_binary(name: str, package: str, extra_dirs: tuple[str, ...] = ()) -> Path:
    found = shutil.which(name)
    if found:
        return Path(found)
    for folder in extra_dirs:
        candidate = Path(folder) / name
        if candidate.exists():
            return candidate
    raise StackError(f"{name} not found on PATH: " + _DEBIAN_HINT.format(pkg=package))


def postgres_bin_dir() -> Path:
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/postgres"), key=lambda p: int(p.split("/")[4]))
    if candidates:
        return Path(candidates[-1]).parent
    found = shutil.which("postgres")
    if found:
        return Path(found).resolve().parent
    raise StackError("PostgreSQL server not found: " + _DEBIAN_HINT.format(pkg="postgresql"))


def java_binary() -> Path:
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").exists():
        return Path(home) / "bin" / "java"
    return system_binary("java", "openjdk-17-jre-headless")


def tool(tools_dir: Path, name: str) -> Path:
    path = tools_dir / "bin" / name
    if not path.exists():
        raise StackError(f"{path} is missing: run `make install` to unpack the pinned {name} binary")
    return path


def pyspark_jars() -> Path:
    # deferred: pyspark's package (its jars' folder) only for the services that run from it
    import pyspark

    return Path(pyspark.__file__).parent / "jars"
