"""Offline validation of the Kubernetes deployment (no cluster, no Docker needed).

- render: ``kubectl kustomize`` builds the overlay (the credentials env file is created
  in a scratch copy when missing, so a fresh clone validates too);
- built-in kinds: ``kubernetes-validate`` in strict mode (unknown fields fail);
- custom resources (Strimzi, spark-operator, Prometheus operator): the real CRDs'
  ``openAPIV3Schema``, made strict (``additionalProperties: false`` wherever the CRD
  does not preserve unknown fields), so a misspelt field fails as it would not with a
  lenient check;
- cross-references and security policy: :mod:`deploy.k8s.cross_references` and checkov.

``python -m deploy.k8s.validate`` runs all of it and prints one line per problem.
"""

from __future__ import annotations

import argparse
import copy
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterable
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import yaml

from deploy.k8s.cross_references import cross_reference_problems
from deploy.k8s.secrets import ensure_credentials_env
from lakehouse.errors import LakehouseError
from lakehouse.settings import REPO_ROOT

K8S_DIR = REPO_ROOT / "k8s"
KIND_OVERLAY = K8S_DIR / "overlays" / "kind"
KUBERNETES_VERSION = "1.32.0"  # kind's node image in k8s/kind-cluster.yaml
CRDS_ENV = "LAKEHOUSE_K8S_CRDS"
CRD_HINT = ("CRDs not found: set LAKEHOUSE_K8S_CRDS to a folder holding the Strimzi 1.2.0, spark-operator 2.5.2 "
            "and prometheus-operator 0.93.0 CRDs, or run `make k8s-crds` (downloads the pinned CRDs into .tools/k8s-crds)")
CHECKOV_ENV = "LAKEHOUSE_CHECKOV"


class ValidationProblem(LakehouseError):
    """Something that keeps the deployment from working; the message says what and where."""


def crd_dir() -> Path | None:
    """Where the CRDs are: $LAKEHOUSE_K8S_CRDS, ../shared/k8s-crds beside the repo, or .tools/k8s-crds."""
    candidates = [os.environ.get(CRDS_ENV), REPO_ROOT.parent / "shared" / "k8s-crds", REPO_ROOT / ".tools" / "k8s-crds"]
    for candidate in candidates:
        if candidate and Path(candidate).is_dir() and any(Path(candidate).rglob("*.yaml")):
            return Path(candidate)
    return None


def render(overlay: Path = KIND_OVERLAY) -> list[dict[str, Any]]:
    """The overlay's resources as ``kubectl kustomize`` renders them."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "k8s"
        shutil.copytree(overlay.parents[1], root, ignore=shutil.ignore_patterns("credentials.env"))
        copied = root / overlay.relative_to(overlay.parents[1])
        # throwaway values: only the shape matters (the node overlay builds on the kind one and its credentials)
        for folder in {copied, root / KIND_OVERLAY.relative_to(overlay.parents[1])}:
            ensure_credentials_env(folder / "credentials.env")
        result = subprocess.run(["kubectl", "kustomize", str(copied)], capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise ValidationProblem(f"kubectl kustomize {overlay} failed: {result.stderr.strip()}")
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


def describe(doc: dict[str, Any]) -> str:
    return f"{doc.get('kind')}/{doc.get('metadata', {}).get('name')}"


def builtin_problems(docs: Iterable[dict[str, Any]], version: str = KUBERNETES_VERSION) -> list[str]:
    """Strict schema errors of every built-in kind (custom kinds are left to :func:`custom_problems`)."""
    problems = []
    for doc in docs:
        if is_custom(doc):
            continue
        try:
            kubernetes_validate.validate(doc, version, strict=True)
        except kubernetes_validate.ValidationError as exc:
            path = "/".join(str(p) for p in exc.path)
            problems.append(f"{describe(doc)}: {path}: {exc.message}")
    return problems


BUILTIN_GROUPS = {"", "apps", "batch", "policy", "autoscaling", "networking.k8s.io", "rbac.authorization.k8s.io",
                  "storage.k8s.io", "scheduling.k8s.io", "coordination.k8s.io", "discovery.k8s.io"}


def is_custom(doc: dict[str, Any]) -> bool:
    """Custom resources belong to an API group Kubernetes itself does not serve."""
    return doc["apiVersion"].rpartition("/")[0] not in BUILTIN_GROUPS


def _strict(schema: Any) -> Any:
    """Copy of a CRD schema in which every object with declared properties rejects others."""
    if isinstance(schema, list):
        return [_strict(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: _strict(v) for k, v in schema.items()}
    if (out.get("type") == "object" and "properties" in out and "additionalProperties" not in out
            and not out.get("x-kubernetes-preserve-unknown-fields")):
        out["additionalProperties"] = False
    return out


@cache
def crd_schemas(directory: Path) -> dict[tuple[str, str], dict[str, Any]]:
    """(apiVersion, kind) -> strict schema, for every served version of every CRD in ``directory``."""
    schemas = {}
    for path in sorted(directory.rglob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if not doc or doc.get("kind") != "CustomResourceDefinition":
                continue
            group, kind = doc["spec"]["group"], doc["spec"]["names"]["kind"]
            for version in doc["spec"]["versions"]:
                if version.get("served", True):
                    schema = copy.deepcopy(version["schema"]["openAPIV3Schema"])
                    schemas[(f"{group}/{version['name']}", kind)] = _strict(schema)
    return schemas


def custom_problems(docs: Iterable[dict[str, Any]], directory: Path) -> list[str]:
    """Strict CRD-schema errors of every custom resource; a custom kind without a CRD is a problem too."""
    schemas = crd_schemas(directory)
    problems = []
    for doc in docs:
        if not is_custom(doc):
            continue
        schema = schemas.get((doc["apiVersion"], doc["kind"]))
        if schema is None:
            problems.append(f"{describe(doc)}: no CRD serves {doc['apiVersion']} {doc['kind']} in {directory}")
            continue
        for error in jsonschema.Draft7Validator(schema).iter_errors(doc):
            path = "/".join(str(p) for p in error.absolute_path)
            problems.append(f"{describe(doc)}: {path}: {error.message}")
    return problems


def checkov_binary() -> Path | None:
    """checkov lives in its own venv (.tools/checkov, `make install`): its pins clash with ours."""
    for candidate in (os.environ.get(CHECKOV_ENV), REPO_ROOT / ".tools" / "checkov" / "bin" / "checkov"):
        if candidate and Path(candidate).exists():
            return Path(candidate)
    return None


def checkov_problems(docs: list[dict[str, Any]]) -> list[str]:
    """checkov's Kubernetes policies over the rendered manifests (skips are justified inline)."""
    binary = checkov_binary()
    if binary is None:
        raise ValidationProblem("checkov not installed: run `make install` (it puts checkov in .tools/checkov)")
    with tempfile.TemporaryDirectory() as tmp:
        for i, doc in enumerate(docs):
            Path(tmp, f"{i:03d}-{doc['kind']}-{doc['metadata']['name']}.yaml").write_text(yaml.safe_dump(doc))
        result = subprocess.run(
            [str(binary), "--framework", "kubernetes", "--skip-download", "--quiet", "--compact", "-o", "json",
             "-d", tmp], capture_output=True, text=True, check=False)
    if result.returncode not in (0, 1):
        raise ValidationProblem(f"checkov failed to run: {result.stderr.strip()[-500:]}")
    report = yaml.safe_load(result.stdout or "{}")
    reports = report if isinstance(report, list) else [report]
    return [f"{c['resource']}: {c['check_id']} {c['check_name']}"
            for r in reports for c in r.get("results", {}).get("failed_checks", [])]


def main() -> None:
    parser = argparse.ArgumentParser(
        description="Validate the Kubernetes deployment offline: render, strict schemas (built-in and CRDs), "
                    "cross-references, checkov. Exit 1 when anything is wrong.")
    parser.add_argument("--overlay", type=Path, default=KIND_OVERLAY, help="kustomize overlay to render")
    parser.add_argument("--no-checkov", action="store_true", help="skip the security policy scan")
    args = parser.parse_args()
    docs = render(args.overlay)
    print(f"rendered {len(docs)} resources from {args.overlay}")
    sections = {"built-in schemas": builtin_problems(docs), "cross-references": cross_reference_problems(docs)}
    crds = crd_dir()
    if crds is None:
        print(f"custom resources: skipped - {CRD_HINT}")
    else:
        sections[f"custom resources ({crds})"] = custom_problems(docs, crds)
    if not args.no_checkov:
        sections["checkov"] = checkov_problems(docs)
    failed = False
    for name, problems in sections.items():
        print(f"{name}: {'ok' if not problems else f'{len(problems)} problem(s)'}")
        for problem in problems:
            print(f"  - {problem}")
        failed |= bool(problems)
    raise SystemExit(1 if failed else 0)


if __name__ == "__main__":
    main()
