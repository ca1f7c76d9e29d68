"""The README's headline figures are generated from the rows `make bench` writes (lab/headline.py)."""

from __future__ import annotations

import dataclasses
import datetime as dt

from lab import headline
from lab.bench.record import TABLE_HEADER, append_rows, at_least, at_most

SINCE = headline.Since("2026-11-28 00:30", "c0ffee0", "a test design")


def _benchmarks(tmp_path):
    path = tmp_path / "benchmarks.md"
    path.write_text(f"# rows\n\n{TABLE_HEADER}\n|---|---|---|---|---|---|---|\n")
    runs = [("2026-11-27 10:00", "old0001", 0.90),  # before the design changed: outside every range
            ("2026-11-28 01:00", "aaa0001", 1.40), ("2026-11-28 02:00", "bbb0002", 2.10),
            ("2026-11-28 03:00", "ccc0003", 3.20)]
    for when, commit, p95 in runs:
        append_rows([at_most("bench ingest --rate 10000 --duration 180", "freshness p95", p95, "s", 3),
                     at_least("bench cdc --rate 1000 --duration 90", "sustained", 980 + 10 * p95, "changes/s", 990)],
                    path, dt.datetime.strptime(when, "%Y-%m-%d %H:%M"), commit)
    return path


def test_the_latest_run_is_quoted_with_its_goal_and_the_range_since_the_design_changed(tmp_path):
    block = headline.render(headline.rows(_benchmarks(tmp_path).read_text()), SINCE)
    p95 = next(line for line in block.splitlines() if "freshness p95" in line and "clicks" in line)
    assert "3.20 s (2026-11-28, ccc0003)" in p95, "the latest run, not the best"
    assert "≤ 3 s: **not met**" in p95, "a missed goal is said beside the figure"
    assert "1.40-3.20 s (3 runs since c0ffee0, a test design: aaa0001, bbb0002, ccc0003)" in p95, \
        "the range leaves out the run before"
    sustained = next(line for line in block.splitlines() if "CDC at 1,000 changes/s: sustained" in line)
    assert "1,012 changes/s" in sustained and "met" in sustained
    assert "not measured since c0ffee0" in next(line for line in block.splitlines() if "headroom" in line)


def test_the_readme_block_is_rewritten_and_a_hand_edit_is_caught(tmp_path, monkeypatch):
    monkeypatch.setattr(headline, "SINCE", SINCE)
    # every figure measured since the test's design (the real blocks name later changes for some paths)
    monkeypatch.setattr(headline, "README_BLOCK", dataclasses.replace(
        headline.README_BLOCK, headlines=tuple(dataclasses.replace(h, since=None) for h in headline.HEADLINES)))
    benchmarks = _benchmarks(tmp_path)
    readme = tmp_path / "README.md"
    readme.write_text(f"# project\n\n{headline.BEGIN}\nold figures\n{headline.END}\n\nmore text\n")
    assert headline.stale(readme, benchmarks) is not None
    assert headline.write(readme, benchmarks) is True
    assert headline.stale(readme, benchmarks) is None
    assert readme.read_text().endswith("\n\nmore text\n") and "ccc0003" in readme.read_text()
    readme.write_text(readme.read_text().replace("3.20 s", "1.40 s"))  # quoting the best run by hand
    assert "run `.venv/bin/lakehouse bench headline`" in headline.stale(readme, benchmarks)
    assert headline.write(readme, benchmarks) is True and headline.write(readme, benchmarks) is False


def test_the_sizing_guide_quotes_the_same_rows_and_says_what_is_missing(tmp_path):
    """docs/scaling.md sizes a cluster from the same rows: the latest CDC run, and no headroom run since the
    design changed said as such (not a day-old figure)."""
    found = headline.rows(_benchmarks(tmp_path).read_text())
    block = headline.render(found, SINCE, headline.SCALING_BLOCK)
    assert block.startswith(headline.SCALING_BLOCK.begin) and block.endswith(headline.SCALING_BLOCK.end)
    applied = next(line for line in block.splitlines() if line.startswith("| CDC changes applied"))
    assert "1,012 changes/s (2026-11-28, ccc0003)" in applied
    assert "not measured since c0ffee0" in next(line for line in block.splitlines() if "highest click rate" in line)
    assert headline.README_BLOCK.begin == headline.BEGIN and headline.README_BLOCK.end == headline.END
