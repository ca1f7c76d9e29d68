"""`make lint`'s docs check: every repository path and link the docs and the README quote exists,
and every doc the code and the tests cite; and the README's headline figures are what
docs/benchmarks.md's rows give (``lab.headline``).

A doc that names a file the code no longer has misleads exactly the newcomer it was written
for (issue 42: docs cited code that no longer ran and a results page that never existed).
Checked: Markdown links to local files, and `backticked` tokens that start with one of the
repository's top-level folders (``pipeline/cdc/apply.py``, ``docs/cdc.md``); a token may
name a Python object after the file (``pipeline/lake_writer/fold.py:fold`` is read as the file).
Generated paths (``results/…``, ``.run/…``, ``.tools/…``) and globs are not checked.

It also flags product code whose docstrings, or whose settings' and options' help texts, quote
measured figures or dates (a decimal time or share, a rate, a percentile's value, a before ->
after, a calendar date): the code says what it does and why; what it measured when, and on
which machine, lives in docs/, where a newer run can replace it.
"""

from __future__ import annotations

import ast
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
    module, _, _obj = quoted.rpartition(".")  # pipeline/lake_writer/catalog_tables.ensure_table: an object in a file
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


PRODUCT = ("lakehouse", "cli", "deploy", "loadgen", "pipeline", "queries")
MEASURED = re.compile(r"\b20\d\d-\d\d-\d\d\b"  # a date
                      r"|\b\d+\.\d+ ?(?:s|ms|%)(?![\w/])"  # a measured time or share: 0.65 s, 3.5 %
                      r"|\b\d[\d,]* ?(?:events|rows|changes)/s\b"  # a rate
                      r"|\bp(?:50|95|99) (?:of )?\d"  # a percentile's value
                      r"|\d ?(?:s )?-> ?\d")  # before -> after


def _texts(tree: ast.AST):
    """(line, text) of every docstring and every ``description=`` / ``help=`` string literal."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            doc = ast.get_docstring(node, clean=False)
            if doc:
                yield getattr(node, "lineno", 1), doc
        elif isinstance(node, ast.keyword) and node.arg in ("description", "help"):
            try:
                text = ast.literal_eval(node.value)
            except ValueError:  # an f-string or a name: not a literal
                continue
            if isinstance(text, str):
                yield node.value.lineno, text


def figures_in_code(root: Path = ROOT) -> list[str]:
    """``file:line: the figure`` for each docstring or help text of the product that quotes a measurement."""
    out = []
    for package in PRODUCT:
        for source in sorted((root / package).rglob("*.py")):
            for line, text in _texts(ast.parse(source.read_text())):
                match = MEASURED.search(text)
                if match:
                    context = " ".join(text[max(0, match.start() - 40):match.end() + 20].split())
                    out.append(f"{source.relative_to(root)}:{line}: {context!r}")
    return out


def main() -> int:
    found = problems()
    for line in found:
        print(f"docs quote a path that does not exist: {line}", file=sys.stderr)
    figures = figures_in_code()
    for line in figures:
        print(f"a docstring or help text quotes a measured figure or a date (say it in docs/): {line}",
              file=sys.stderr)
    headline = stale()
    if headline:
        print(headline, file=sys.stderr)
    return 1 if found or figures or headline else 0


if __name__ == "__main__":
    sys.exit(main())
