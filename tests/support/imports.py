"""What a module imports, read from its source: for the tests that check the import graph."""

from __future__ import annotations

import ast
from pathlib import Path


def top_level_imports(path: Path) -> set[str]:
    """The modules loading ``path`` loads: its top-level imports, each ``from a import b`` as ``a`` and ``a.b``
    (``b`` may be a module or a name; callers keep what names a module of theirs)."""
    found: set[str] = set()
    for node in ast.parse(path.read_text(), str(path)).body:
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.update([node.module, *(f"{node.module}.{a.name}" for a in node.names)])
    return found
