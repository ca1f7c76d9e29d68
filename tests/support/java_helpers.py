"""The tests' own small Java helpers (tests/support/java), compiled into a jar for the tests' Spark session.

Only tests use them (``EqualityDeletes`` writes equality deletes, which no writer of the project does,
so the readers can be tested against them), so they are built here, not by `make install`, and the
image never holds them.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import zipfile
from pathlib import Path

from deploy import maven

SOURCES = Path(__file__).with_name("java")


def helper_jar(tools_dir: Path, out_dir: Path) -> Path:
    """``out_dir``/lakehouse-test-helpers.jar, compiled against pyspark's and the project's Spark jars."""
    out = out_dir / "lakehouse-test-helpers.jar"
    sources = sorted(SOURCES.rglob("*.java"))
    if out.exists() and all(out.stat().st_mtime >= src.stat().st_mtime for src in sources):
        return out
    javac = shutil.which("javac")
    assert javac, "javac not found: install Debian's openjdk-17-jdk-headless (make install does)"
    # deferred: pyspark's jar folder, only when the tests' Spark session is built
    import pyspark

    classpath = os.pathsep.join([f"{Path(pyspark.__file__).parent / 'jars'}/*",
                                 str(maven.profile_dir(tools_dir, "spark") / "*")])
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as build:
        subprocess.run([javac, "-nowarn", "-d", build, "-cp", classpath, *map(str, sources)], check=True)
        tmp = out.with_suffix(".part")
        with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as jar:
            jar.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\n")
            for cls in Path(build).rglob("*.class"):
                jar.write(cls, cls.relative_to(build).as_posix())
        os.replace(tmp, out)
    return out
