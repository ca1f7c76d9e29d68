"""`python -m lab.image_contents`: what the image's Python environment and jars weigh, from this machine.

No Docker engine is needed: the image installs deploy/image-requirements.lock and the jars of
deploy/jvm/pom.xml's spark profile (`--cluster`), the same pins the local venv and .tools hold, so their
installed sizes here are the image's, base image aside. Printed beside what the image leaves
out: the test extra, the local stack's servers and the wheel cache.
"""

from __future__ import annotations

import importlib.metadata as metadata
import os
import re
from pathlib import Path

from lakehouse.settings import REPO_ROOT, Settings

MIB = 2**20


def _pins(lock: Path) -> set[str]:
    return set(re.findall(r"^([A-Za-z0-9_.-]+)==", lock.read_text(), re.M))


def installed_bytes(names: set[str]) -> int:
    total = 0
    for name in names:
        dist = metadata.distribution(name)
        total += sum(os.path.getsize(p) for f in dist.files or [] if (p := Path(str(dist.locate_file(f)))).is_file())
    return total


def folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) if folder.is_dir() else 0


def main() -> None:
    tools = Settings().tools_dir
    image = _pins(REPO_ROOT / "deploy/image-requirements.lock")
    full = _pins(REPO_ROOT / "requirements.lock")
    rows = [("in the image: Python packages (deploy/image-requirements.lock)", installed_bytes(image)),
            ("in the image: jars (.tools/jvm/spark)", folder_bytes(tools / "jvm" / "spark")),
            ("left out: the test extra", installed_bytes(full - image)),
            ("left out: the local stack's servers (.tools/bin, .tools/trino, .tools/jvm/{kafka,trino})",
             sum(folder_bytes(f) for f in (tools / "bin", tools / "trino", tools / "jvm" / "kafka",
                                           tools / "jvm" / "trino"))),
            ("left out: the wheel cache (.tools/cache)", folder_bytes(tools / "cache"))]
    for what, size in rows:
        print(f"{size / MIB:8,.0f} MiB  {what}")


if __name__ == "__main__":
    main()
