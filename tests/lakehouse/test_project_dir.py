"""Where .run, .tools and results/ go: the checkout when there is one, else what the user says.

An installed copy of the package (not editable) lives in site-packages, where a path taken
from the source file would put the stack's data beside the interpreter's libraries.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PRINT = "from lakehouse.settings import REPO_ROOT, Settings; print(REPO_ROOT); print(Settings().run_dir)"


def _resolved(pythonpath: Path, cwd: Path, **env: str) -> list[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("LAKEHOUSE_")}
    done = subprocess.run([sys.executable, "-c", PRINT], cwd=cwd, env=clean | env | {"PYTHONPATH": str(pythonpath)},
                          capture_output=True, text=True, check=True)
    return done.stdout.split()


def test_a_checkout_is_its_own_project_dir(tmp_path):
    assert _resolved(ROOT, tmp_path) == [str(ROOT), str(ROOT / ".run")]


def test_an_installed_copy_uses_the_configured_dir_or_the_current_one(tmp_path):
    site = tmp_path / "site-packages"
    shutil.copytree(ROOT / "lakehouse", site / "lakehouse", ignore=shutil.ignore_patterns("__pycache__"))
    work, chosen = tmp_path / "work", tmp_path / "chosen"
    work.mkdir()
    assert _resolved(site, work) == [str(work), str(work / ".run")]
    assert _resolved(site, work, LAKEHOUSE_PROJECT_DIR=str(chosen)) == [str(chosen), str(chosen / ".run")]
