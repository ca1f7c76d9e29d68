"""`lakehouse demo` (what `make demo` runs) tells the whole story on a real stack."""

from __future__ import annotations

import os
import re
import subprocess
import sys

from lakehouse.settings import REPO_ROOT


def test_demo_runs_end_to_end_and_summarises(stack):
    env = {**os.environ, "LAKEHOUSE_PIPELINE__DIMENSION_REFRESH_SECONDS": "2"}  # see the update sooner
    # 30 s: the price update (a third of the way in) reaches the enrichment ~9 s later on a loaded CI machine
    # (its first MERGE of an update compiles), and events are enriched within ~2 s of being produced.
    # --changes 0: with Locust's 20 changes/s the dimension apply MERGEs every second and, on a loaded CI machine,
    # the price update reached the enrichment after the run (tests/lab/test_system_bench.py runs the
    # database changes; the update alone still gives the dimensions' freshness verdict a row)
    out = subprocess.run([sys.executable, "-m", "cli.main", "demo", "--rate", "500", "--duration", "30",
                          "--changes", "0"],
                         capture_output=True, text=True, cwd=REPO_ROOT, timeout=600, env=env)
    text = out.stdout + out.stderr
    assert out.returncode == 0, text[-3000:]
    assert "Traceback" not in text
    for heading in ("top products before the price update", "top products after", "clicks on product 1",
                    "dead letters by reason", "an app release: deviceType", "demo summary", "Locust report", "report with plots"):
        assert heading in text, f"missing {heading!r}"
    produced = int(re.search(r"events produced\s*│\s*([\d,]+)", text).group(1).replace(",", ""))
    committed = int(re.search(r"events committed \(valid \+ dead-lettered\)\s*│\s*([\d,]+)", text)
                    .group(1).replace(",", ""))
    assert produced > 3000 and committed == produced
    assert "8.1000" in text, "the seed's price update reached the click enrichment through CDC"
    # the app release: deviceType became a column during this run (the test stack's table is new), or was one
    schema_row = r"click table schema changes\s*│\s*(added deviceType string|none \(had deviceType\))\s*│"
    assert re.search(schema_row, text), "the schema change row"
    assert re.search(r"│\s*(ios|android|web|tv)\s*│\s*[\d,]+\s*│", text), "rows carrying deviceType"
    # freshness per table, each against its goal, measured on this run's rows (Locust changed the database too)
    page = max((REPO_ROOT / "results").glob("demo-*/report/index.html"), key=lambda p: p.stat().st_mtime)
    report = page.read_text()
    assert (page.parent / "0-freshness-measured.png").stat().st_size > 10_000
    for name in ("clicks", "dimensions", "aggregates"):
        verdict = re.search(rf"^{name} \(.+\): p95 ([\d.]+) s over ([\d,]+) rows, goal <= [\d.]+ s: (met|NOT met)$",
                            text, re.MULTILINE)
        assert verdict, f"no freshness verdict for the {name}"
        assert 0 < float(verdict.group(1)) < 120 and int(verdict.group(2).replace(",", "")) > 0, verdict.group(0)
        # the report draws the same measurement for every table the summary reports, the dimensions included
        row = re.search(rf"<tr><td>{name}</td><td>[^<]+</td><td>[\d,]+</td><td>[\d.]+</td><td>([\d.]+)</td>", report)
        assert row, f"the report has no measured freshness for the {name}"
        assert abs(float(row.group(1)) - float(verdict.group(1))) <= 0.055, (row.group(0), verdict.group(0))  # .2f, .1f
