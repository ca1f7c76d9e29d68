"""The layout's rules, read from the source: imports run one way and the product never needs the harness.

The layers, lowest first (a module may import its own layer and the ones below it):
the base (``lakehouse`` without its CLI) <- ``deploy`` (what is installed where) <-
``loadgen`` and ``pipeline`` <- ``queries`` <- ``lab`` (the harness) <- ``lakehouse.cli``.
The image ships everything but ``lab`` and ``tests``, so the CLI reaches the harness only
inside the commands that need it, and a product command's ``--help`` must work without it.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.imports import top_level_imports

ROOT = Path(__file__).resolve().parents[2]
LAYER = {"base": 0, "deploy": 1, "loadgen": 2, "pipeline": 2, "queries": 3, "lab": 4, "cli": 5}
ENTRY_POINT = Path("lakehouse/__main__.py")  # `python -m lakehouse`: the CLI's door, not part of the base


def _layer_of(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] == "lakehouse":
        return "cli" if parts[1:2] == ["cli"] else "base"
    return parts[0] if parts[0] in LAYER else None


def _imports(path: Path) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.lineno, node.module))
    return found


def _sources() -> list[Path]:
    return [p.relative_to(ROOT) for folder in ("lakehouse", "deploy", "loadgen", "pipeline", "queries", "lab")
            for p in sorted((ROOT / folder).rglob("*.py"))]


def test_imports_only_go_down_the_layers():
    upward = []
    for path in _sources():
        if path == ENTRY_POINT:
            continue
        source = _layer_of(".".join(path.with_suffix("").parts))
        for line, module in _imports(ROOT / path):
            target = _layer_of(module)
            if target and source and LAYER[target] > LAYER[source]:
                upward.append(f"{path}:{line} ({source}) imports {module} ({target})")
    assert not upward, "imports running up the layers:\n" + "\n".join(upward)


def test_the_layout_has_the_harness_apart_from_the_product():
    shipped = (ROOT / "deploy/Dockerfile").read_text()
    assert "COPY lab" not in shipped and "COPY tests" not in shipped
    for folder in ("lakehouse", "deploy", "loadgen", "pipeline", "queries"):
        benchmarks = [p for p in (ROOT / folder).rglob("*.py") if "bench" in p.stem and "cli" not in p.parts]
        assert not benchmarks, f"harness modules inside the product: {benchmarks}"


@pytest.mark.parametrize("args", [["run", "--help"], ["sql", "--help"], ["contract", "show"]])
def test_product_commands_work_without_the_harness(args):
    """As in the image: ``lab`` is not there. Blocking its import makes any stray top-level import fail here."""
    code = ("import sys; sys.modules['lab'] = None\n"
            "from lakehouse.cli.main import app\n"
            f"app({args!r}, standalone_mode=False)")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip()


def _function_level_imports(path: Path):
    lines = (ROOT / path).read_text().splitlines()
    for fn in ast.walk(ast.parse("\n".join(lines))):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for node in ast.walk(fn):
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    yield node.lineno, lines[max(fn.lineno, node.lineno - 6):node.lineno]


def test_an_import_inside_a_function_says_what_it_defers():
    """Outside the CLI (whose commands all import what they run, lakehouse/cli/__init__.py says why), an
    import inside a function hides the real graph, so it is there only to defer something heavy, and says so."""
    silent = [f"{path}:{line}" for path in _sources() if "cli" not in path.parts
              for line, above in _function_level_imports(path) if not any("# deferred:" in x for x in above)]
    assert not silent, "imports inside functions without a '# deferred: why' comment:\n" + "\n".join(silent)


def test_no_two_modules_import_each_other_even_through_others():
    """Module-level imports form no cycle (a cycle works only while nobody reorders the imports)."""
    modules = {".".join(p.with_suffix("").parts).removesuffix(".__init__"): p for p in _sources()}
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for module, path in modules.items():
        graph[module] = {n for n in top_level_imports(ROOT / path) if n in modules and n != module}
    state: dict[str, int] = {}
    cycles: list[list[str]] = []

    def visit(module: str, trail: list[str]) -> None:
        state[module] = 1
        for target in sorted(graph[module]):
            if state.get(target) == 1:
                cycles.append([*trail[trail.index(target):], target])
            elif target not in state:
                visit(target, [*trail, target])
        state[module] = 2

    for module in sorted(modules):
        if module not in state:
            visit(module, [module])
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


def test_a_test_module_imports_helpers_from_the_support_package_never_from_another_test():
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    offenders = []
    for path in sorted((root / "tests").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("tests.") \
                    and node.module.split(".")[-1].startswith("test_"):
                offenders.append(f"{path.relative_to(root)} imports {node.module}")
    assert not offenders, "move shared helpers to tests/support/: " + "; ".join(offenders)
