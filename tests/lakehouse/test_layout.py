"""The layout's rules, read from the source: imports run one way and the product never needs the harness.

The layers, lowest first (a module may import its own layer and the ones below it):
the base (``lakehouse``: settings, catalog, contract, errors) <- ``deploy`` (what is installed
where) <- ``loadgen`` and ``pipeline`` <- ``queries`` <- ``cli`` (the product's command line) <-
``lab`` (the harness, whose commands plug into the command line through an entry point).
The image ships everything but ``lab`` and ``tests``: nothing in the product imports the
harness, and the command line lists the harness's commands only where it is installed.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.imports import top_level_imports

ROOT = Path(__file__).resolve().parents[2]
LAYER = {"base": 0, "deploy": 1, "loadgen": 2, "pipeline": 2, "queries": 3, "cli": 4, "lab": 5}
PRODUCT = ("lakehouse", "cli", "deploy", "loadgen", "pipeline", "queries")
COMMANDS = (Path("cli"), Path("lab/commands"))  # each command imports what it runs in its body (cli/__init__.py)


def _layer_of(module: str) -> str | None:
    top = module.split(".")[0]
    return "base" if top == "lakehouse" else top if top in LAYER else None


def _imports(path: Path) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.lineno, node.module))
    return found


def _sources() -> list[Path]:
    return [p.relative_to(ROOT) for folder in (*PRODUCT, "lab") for p in sorted((ROOT / folder).rglob("*.py"))]


def test_imports_only_go_down_the_layers():
    """Every import, inside functions too: the product reaches the harness nowhere, not even lazily."""
    upward = []
    for path in _sources():
        source = _layer_of(".".join(path.with_suffix("").parts))
        for line, module in _imports(ROOT / path):
            target = _layer_of(module)
            if target and source and LAYER[target] > LAYER[source]:
                upward.append(f"{path}:{line} ({source}) imports {module} ({target})")
    assert not upward, "imports running up the layers:\n" + "\n".join(upward)


def test_the_layout_has_the_harness_apart_from_the_product():
    shipped = (ROOT / "deploy/Dockerfile").read_text()
    assert "COPY lab" not in shipped and "COPY tests" not in shipped
    assert not [f for f in PRODUCT if f"COPY {f} {f}" not in shipped], "the image must hold every product package"
    for folder in PRODUCT:
        benchmarks = [p for p in (ROOT / folder).rglob("*.py") if "bench" in p.stem or "chaos" in p.stem]
        assert not benchmarks, f"harness modules inside the product: {benchmarks}"


def test_the_command_line_lists_the_harness_only_where_it_is_installed():
    """In the image (no ``lab``) `lakehouse --help` offers no command that cannot run; here it offers them all."""
    code = ("import sys; sys.modules['lab'] = None\n"
            "from cli.main import app\n"
            "print(sorted(c.name for c in app.registered_commands) + sorted(g.name for g in app.registered_groups))")
    without = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    with_lab = subprocess.run([sys.executable, "-c", code.split("\n", 1)[1]], cwd=ROOT, capture_output=True, text=True,
                              timeout=120)
    assert without.returncode == 0 and with_lab.returncode == 0, without.stderr[-2000:] + with_lab.stderr[-2000:]
    product, everything = ast.literal_eval(without.stdout), ast.literal_eval(with_lab.stdout)
    assert {"run", "sql", "query", "stack", "load"} <= set(product)
    assert not {"bench", "chaos", "demo", "report"} & set(product)
    assert {"bench", "chaos", "demo", "report"} <= set(everything)


@pytest.mark.parametrize("args", [["run", "--help"], ["sql", "--help"], ["contract", "show"]])
def test_product_commands_work_without_the_harness(args):
    """As in the image: ``lab`` is not there. Blocking its import makes any stray top-level import fail here."""
    code = ("import sys; sys.modules['lab'] = None\n"
            "from cli.main import app\n"
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
    """Outside the commands (which all import what they run, cli/__init__.py says why), an import
    inside a function hides the real graph, so it is there only to defer something heavy, and says so."""
    silent = [f"{path}:{line}" for path in _sources() if not any(path.is_relative_to(c) for c in COMMANDS)
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
