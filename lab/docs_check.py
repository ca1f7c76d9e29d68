"""`make lint`'s docs check: every repository path and link the docs and the README quote exists,
and every doc the code and the tests cite; and the README's headline figures are what
docs/benchmarks.md's rows give (``lab.headline``).

A doc that names a file the code no longer has misleads exactly the newcomer it was written
for (issue 42: docs cited code that no longer ran and a results page that never existed).
Checked: Markdown links to local files, and `backticked` tokens that start with one of the
repository's top-level folders (``pipeline/cdc/apply.py``, ``docs/cdc.md``); a token may
name a Python object after the file (``pipeline/cdc/fold.py:fold`` is read as the file).
Generated paths (``results/…``, ``.run/…``, ``.tools/…``) and globs are not checked.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from lab.headline import stale

ROOT = Path(__file__).resolve().parent.parent
TOP = ("pipeline", "lakehouse", "cli", "lab", "loadgen", "queries", "deploy", "docs", "tests", "k8s", ".ci")
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")
CODE = re.compile(r"`([^`\s]+)`")


def _candidates(text: str) -> list[str]:
    found = [m for m in LINK.findall(text) if "://" not in m and not m.startswith("mailto:")]
    for token in CODE.findall(text):
        path = token.split(":")[0].rstrip(".,;)")
        if path.split("/")[0] in TOP and "/" in path and not any(c in path for c in "*<>{}$…"):
            found.append(path)
    return found


DOC_IN_CODE = re.compile(r"\b(docs/[\w./-]+\.md)\b")


def _exists(root: Path, base: Path, quoted: str) -> bool:
    if (base / quoted).exists() or (root / quoted).exists():
        return True
    module, _, _obj = quoted.rpartition(".")  # pipeline/pyiceberg_tables.replace_contents: an object in a file
    return bool(module) and (root / f"{module}.py").exists()


def problems(root: Path = ROOT) -> list[str]:
    """``file: missing path`` for every path a doc quotes, and every doc the code and tests cite, that does not exist."""
    out = []
    for doc in [root / "README.md", *sorted((root / "docs").rglob("*.md"))]:
        for quoted in _candidates(doc.read_text()):
            if not _exists(root, doc.parent, quoted):
                out.append(f"{doc.relative_to(root)}: {quoted}")
    for package in TOP:
        for source in sorted((root / package).rglob("*.py")) if (root / package).is_dir() else ():
            for quoted in DOC_IN_CODE.findall(source.read_text()):
                if not (root / quoted).exists():
                    out.append(f"{source.relative_to(root)}: {quoted}")
    return out


def main() -> int:
    found = problems()
    for line in found:
        print(f"docs quote a path that does not exist: {line}", file=sys.stderr)
    headline = stale()
    if headline:
        print(headline, file=sys.stderr)
    return 1 if found or headline else 0


if __name__ == "__main__":
    sys.exit(main())
