"""The CI-sized chaos run: one fault of each kind under load, zero lost and zero duplicated.

Runs `lakehouse chaos --faults ci --outage 15 --settle 5` as a user would (its own stack on ports +200, its run
directory on a bounded tmpfs) and reads the table it writes. `make chaos` runs every
fault; docs/chaos.md records that run's table.
"""

from __future__ import annotations

import csv
import os
import subprocess
import sys

import pytest

from lab.chaos.faults import CI_SUBSET, catalog

# ~5 minutes on 2 cores, part of `make test`; `make test-chaos` runs it alone.
pytestmark = [pytest.mark.slow, pytest.mark.chaos, pytest.mark.timeout(3000)]


def test_ci_faults_lose_and_duplicate_nothing(tmp_path):
    out = tmp_path / "chaos"
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAKEHOUSE_")}
    run = subprocess.Popen([sys.executable, "-m", "cli", "chaos", "--faults", "ci", "--outage", "15", "--settle", "5",
                            "--out", str(out)],
                           env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _, stderr = run.communicate(timeout=2700)
    except subprocess.TimeoutExpired:
        run.terminate()  # SIGTERM: the suite stops its processes and its stack before it exits
        _, stderr = run.communicate(timeout=300)
    done = subprocess.CompletedProcess(run.args, run.returncode, "", stderr)
    print(done.stderr[-6000:])
    assert done.returncode == 0, done.stderr[-4000:]
    rows = list(csv.DictReader((out / "chaos.csv").open()))
    titles = [catalog()[k].title for k in CI_SUBSET]
    assert [r["fault"] for r in rows] == ["warm-up", *titles]
    for row in rows:
        assert row["recovery_s"], f"{row['fault']} did not recover"
        assert int(row["lost"]) == 0 and int(row["duplicated"]) == 0, row
    disk = next(r for r in rows if r["fault"] == catalog()["disk-full"].title)
    if disk["note"].startswith("skipped"):  # no disk of its own to fill: say so, do not pass
        pytest.fail(f"the disk-full fault did not run: {disk['note']}")
    assert "writers paused with a clear message" in disk["note"], disk
    assert "dimensions equal to MariaDB: True" in done.stderr
    assert "skewed-clock events dead-lettered 50/50" in done.stderr
