"""Content tags for the images `make up` builds: the same tree gives the same tag, any change a new one.

Computed here rather than with ``sha256sum`` in up.sh: stock macOS has no ``sha256sum`` (it has
``shasum -a 256``), and the venv exists before up.sh runs. The files hashed are every file the
image's Dockerfile copies, so a change to any of them rolls every workload.
"""

from __future__ import annotations

import argparse
import hashlib
from pathlib import Path

from lakehouse.settings import REPO_ROOT

#: what deploy/Dockerfile copies from the repository (files and folders)
IMAGE_INPUTS = ("deploy/Dockerfile", "requirements.lock", "pyproject.toml", "README.md", "lakehouse", "cli", "pipeline",
                "loadgen", "queries", "deploy")


def _files(root: Path, inputs: tuple[str, ...]) -> list[Path]:
    found: set[Path] = set()
    for name in inputs:
        path = root / name
        if path.is_file():
            found.add(path)
        elif path.is_dir():
            found.update(p for p in path.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    return sorted(found, key=lambda p: p.relative_to(root).as_posix())


def content_tag(root: Path = REPO_ROOT, inputs: tuple[str, ...] = IMAGE_INPUTS, length: int = 12) -> str:
    """A hash of every input file's path and bytes."""
    digest = hashlib.sha256()
    for path in _files(root, inputs):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0")
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()[:length]


def main() -> None:
    parser = argparse.ArgumentParser(description="Print the content tag of an image `make up` builds.")
    parser.add_argument("--dockerfile", help="Tag by this one file (the spark-operator image) instead of the "
                                             "lakehouse image's inputs.")
    args = parser.parse_args()
    print(content_tag(inputs=(args.dockerfile,), length=8) if args.dockerfile else content_tag())


if __name__ == "__main__":
    main()
