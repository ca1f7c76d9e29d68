"""`lakehouse bench system` and `bench headroom` measure what they say, on the real stack (small loads).

The figures themselves are benchmarks (docs/benchmarks.md); these runs prove the machinery:
everything starts, freshness is measured per table on the run's own rows, the exactly-once
checks read real tables and pass, and the headroom climb stops by itself and prints its ratio.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from lakehouse.settings import REPO_ROOT

pytestmark = [pytest.mark.stack]


def _lakehouse(*args: str, timeout: float) -> str:
    out = subprocess.run([sys.executable, "-m", "cli.main", *args], capture_output=True, text=True,
                         cwd=REPO_ROOT, timeout=timeout)
    text = out.stdout + out.stderr
    assert out.returncode == 0, text[-3000:]
    assert "Traceback" not in text
    return text


def test_whole_system_bench_measures_each_table_and_checks_exactly_once(stack):
    text = _lakehouse("bench", "system", "--rate", "300", "--changes", "10", "--duration", "20", timeout=600)
    for name in ("clicks", "dimensions", "aggregates"):
        verdict = re.search(rf"^{name} \(.+\): p95 ([\d.]+) s over ([\d,]+) rows", text, re.MULTILINE)
        assert verdict, f"no freshness verdict for the {name}"
        assert 0 < float(verdict.group(1)) < 120 and int(verdict.group(2).replace(",", "")) > 0, verdict.group(0)
    checks = re.findall(r"^(exact|NOT exact): (.+)$", text, re.MULTILINE)
    assert len(checks) == 5 and all(ok == "exact" for ok, _ in checks), checks
    saved = json.loads(Path(re.search(r"saved (\S+bench-system\.json)", text).group(1)).read_text())
    assert saved["exact"] and saved["produced"] > 4000 and saved["changes"] > 100
    # every part that worked under load shows CPU (the jobs' process trees, Locust, the services)
    busy = {part for part, cores in saved["cpu_cores"].items() if cores > 0}
    assert {"click ingestion + live aggregates", "dimension apply", "load generator (Locust)", "broker",
            "object store", "metastore"} <= busy, saved["cpu_cores"]
    assert sum(saved["cpu_cores"].values()) < 2 * (os.cpu_count() or 1), saved["cpu_cores"]  # cores, not seconds


def test_headroom_climbs_until_a_rate_fails_or_the_list_ends_and_prints_the_ratio(stack):
    text = _lakehouse("bench", "headroom", "--rates", "400,800", "--seconds", "15", timeout=600)
    rows = re.findall(r"│\s*([\d,]+)\s*│\s*([\d,]+)\s*│\s*([\d,]+)\s*│\s*([\d.]+)\s*│\s*([\d.]+)\s*│\s*(yes|no)\s*│", text)
    assert rows and rows[0][0] == "400", text[-2000:]
    # the climb goes on after a rate that held, and stops at one that did not
    assert [r[0] for r in rows] == (["400", "800"] if rows[0][5] == "yes" else ["400"])
    assert all(float(r[3]) < 60 for r in rows)  # a few hundred events/s are committed within seconds
    ratio = re.search(r"highest rate held ([\d,]+) events/s; raw ceiling ([\d,]+) events/s; ratio (\d+)%", text)
    assert ratio and int(ratio.group(2).replace(",", "")) > max(1000, int(ratio.group(1).replace(",", "")))
