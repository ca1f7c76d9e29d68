"""Each pod gets only the credentials its code reads, by name.

The keys a workload of the project's image needs are read off the code: the settings it
resolves with ``secret(value, "section.field")`` in the modules its command imports, and
the ``${ENV:…}``/``${env.…}`` references in the config files mounted into it (Trino's catalog,
the metastore's hive-site). The keys it gets are the ``secretKeyRef``s of its rendered
manifest. They must be equal: a key it does not read is a credential it should not hold
(MySQL's root password in the load generator), a key it reads but lacks fails at its first login.
"""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

import pytest

from deploy.k8s import validate
from lakehouse.settings import REPO_ROOT
from pipeline.jobs import JOBS
from tests.support.imports import top_level_imports
from tests.support.k8s import SECRET, pods, secret_given

FIRST_PARTY = ("lakehouse", "cli", "pipeline", "loadgen", "queries", "deploy")
ENV_REFERENCE = re.compile(r"\$\{(?:ENV:|env\.)(LAKEHOUSE_[A-Z0-9_]+)\}")


def _source(module: str) -> Path | None:
    base = REPO_ROOT / module.replace(".", "/")
    for candidate in (base / "__init__.py", base.with_suffix(".py")):
        if candidate.is_file():
            return candidate
    return None


@cache
def _imported(module: str) -> frozenset[str]:
    """The module's top-level imports: what loading it loads (a deferred import runs only where it is called)."""
    return frozenset(n for n in top_level_imports(_source(module)) if n.split(".")[0] in FIRST_PARTY and _source(n))


def _keys_read(entries: list[str]) -> set[str]:
    """``LAKEHOUSE_<SECTION>__<FIELD>`` of every ``secret(…, "section.field")`` the entries reach by importing."""
    seen, todo = set(), list(entries)
    while todo:
        module = todo.pop()
        if module not in seen and _source(module):
            seen.add(module)
            todo.extend(_imported(module))
    keys = set()
    for module in seen:
        for node in ast.walk(ast.parse(_source(module).read_text())):
            if (isinstance(node, ast.Call) and getattr(node.func, "id", None) == "secret" and len(node.args) == 2
                    and isinstance(node.args[1], ast.Constant)):
                section, field = node.args[1].value.split(".")
                keys.add(f"LAKEHOUSE_{section.upper()}__{field.upper()}")
    return keys


def _cli_entries(args: list[str]) -> list[str]:
    """`lakehouse run NAME …`: what that command imports, and the modules of the jobs it runs."""
    assert args[0] == "run", args
    command = args[1].replace("-", "_")
    tree = ast.parse((REPO_ROOT / "cli/run.py").read_text())
    functions = {f.name: f for f in tree.body if isinstance(f, ast.FunctionDef)}
    entries = [n.module for n in tree.body if isinstance(n, ast.ImportFrom) and n.module]  # run.py's own
    todo, done = [command], set()
    while todo:  # the command's body, and the helpers it calls (_run_single, _service)
        name = todo.pop()
        done.add(name)
        for node in ast.walk(functions[name]):
            if isinstance(node, ast.ImportFrom) and node.module:
                entries.append(node.module)
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) in functions.keys() - done:
                todo.append(node.func.id)
    jobs = args[args.index("--jobs") + 1].split(",") if "--jobs" in args else [args[1]]
    entries += [JOBS[j].factory.partition(":")[0] for j in jobs if j in JOBS]
    return entries


def _entries(command: list[str]) -> list[str]:
    if command[:2] == ["python", "-m"]:
        return [command[2]]
    if command[0] == "locust":
        path = command[command.index("-f") + 1].removeprefix("/opt/lakehouse/")
        return [path.removesuffix(".py").replace("/", ".")]
    if command[0] == "lakehouse":
        return _cli_entries(command[1:])
    raise AssertionError(f"no rule for the command {command}")


def _mounted_references(pod, docs) -> set[str]:
    maps = {d["metadata"]["name"]: d for d in docs if d["kind"] == "ConfigMap"}
    names = {v["configMap"]["name"] for v in pod.get("volumes", []) if "configMap" in v}
    return {ref for n in names for value in maps[n].get("data", {}).values() for ref in ENV_REFERENCE.findall(value)}


@pytest.fixture(scope="module")
def docs():
    return validate.render()


def test_no_pod_takes_the_whole_secret(docs):
    whole = [name for name, pod, _, _ in pods(docs) if secret_given(pod)[1]]
    assert not whole, f"envFrom the whole {SECRET} Secret (every credential, MySQL's root included): {whole}"


def test_each_pod_of_the_project_image_gets_exactly_the_keys_its_code_reads(docs):
    wrong = []
    for name, pod, command, ours in pods(docs):
        if not ours:
            continue
        needed = _keys_read(_entries(command)) | _mounted_references(pod, docs)
        given, _ = secret_given(pod)
        if given != needed:
            wrong.append(f"{name}: gets {sorted(given)}, its code reads {sorted(needed)}")
    assert not wrong, "\n".join(wrong)


def test_trino_gets_only_what_its_catalog_file_names(docs):
    trino = next((name, pod) for name, pod, _, _ in pods(docs) if "trino" in name)
    given, whole = secret_given(trino[1])
    assert not whole and given == _mounted_references(trino[1], docs) == {"LAKEHOUSE_S3__ACCESS_KEY",
                                                                          "LAKEHOUSE_S3__SECRET_KEY"}
