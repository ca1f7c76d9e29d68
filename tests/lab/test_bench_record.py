"""docs/benchmarks.md gains one dated row per figure, judged against its goal."""

from __future__ import annotations

import datetime as dt

import pytest

from lab.bench.record import TABLE_HEADER, Figure, append_rows, at_least, at_most


def test_rows_are_appended_under_the_table_with_their_verdict(tmp_path):
    page = tmp_path / "benchmarks.md"
    page.write_text(f"# Benchmarks\n\n{TABLE_HEADER}\n|---|---|---|---|---|---|---|\n| old | row |\n")
    when = dt.datetime(2026, 11, 24, 18, 5, tzinfo=dt.timezone.utc)
    append_rows([at_most("bench ingest", "freshness p95", 2.4, "s", 3),
                 at_least("bench cdc", "sustained", 912.0, "changes/s", 990),
                 Figure("bench ingest", "sustained", 10_012.4, "events/s")], page, when, "abc1234")
    lines = page.read_text().splitlines()
    assert lines[4] == "| old | row |", "earlier rows stay as they were"
    assert lines[5:] == [
        "| 2026-11-24 18:05 | abc1234 | `bench ingest` | freshness p95 | 2.40 s | <= 3 s | yes |",
        "| 2026-11-24 18:05 | abc1234 | `bench cdc` | sustained | 912 changes/s | >= 990 changes/s | **no** |",
        "| 2026-11-24 18:05 | abc1234 | `bench ingest` | sustained | 10,012 events/s |  |  |",
    ]


def test_a_page_without_the_table_is_refused(tmp_path):
    page = tmp_path / "benchmarks.md"
    page.write_text("# nothing here\n")
    with pytest.raises(ValueError, match="no benchmark table"):
        append_rows([Figure("x", "y", 1.0, "s")], page)


def test_the_commit_rate_is_the_slope_under_load_not_the_time_until_the_last_commit():
    from lab.bench.ingest import commit_rate

    # Keeping up at 10,000/s with 2 s of freshness: commits trail the load by 2 s throughout.
    keeping_up = [(t / 2, max(0, int(10_000 * (t / 2 - 2)))) for t in range(0, 361)]
    assert commit_rate(keeping_up) == pytest.approx(10_000, rel=0.01)
    # Falling behind: commits grow at 8,000/s while 10,000/s are produced.
    lagging = [(t / 2, int(8_000 * t / 2)) for t in range(0, 361)]
    assert commit_rate(lagging) == pytest.approx(8_000, rel=0.01)


def test_whole_system_and_headroom_figures_are_judged_against_their_goals():
    from lab.bench.freshness import Freshness
    from lab.bench.headroom import HeadroomResult, Step
    from lab.bench.record import headroom_figures, system_figures
    from lab.bench.system import Check, SystemBenchResult

    system = SystemBenchResult(2000, 20, 180, 360_000, 360_000, 1990.0, 3500,
                               [Freshness("clicks", "t", 2.0, 4.0, 6.0, 10), Freshness("dimensions", "d", 3.0, 7.0, 9.0, 5),
                                Freshness("aggregates", "a", 5.0, 9.5, 12.0, 10)],
                               [Check("one", True, ""), Check("two", False, "lost 3")])
    rows = {f.figure: f for f in system_figures(system, "bench system")}
    assert rows["clicks freshness p95"].met and rows["clicks freshness p95"].goal == "<= 5 s"
    assert not rows["dimensions freshness p95"].met
    assert rows["aggregates freshness p95"].met and rows["aggregates freshness p95"].goal == "<= 10 s"
    assert rows["sustained / produced rate"].value == pytest.approx(99.5)
    assert rows["exactly-once checks passed"].value == 1 and rows["exactly-once checks passed"].met is False

    climb = HeadroomResult([Step(20_000, 19_800, 20_100, 3.0, 1.0, "a"), Step(30_000, 29_500, 26_000, 14.0, 9.0, "b")],
                           raw_ceiling_eps=70_000)
    assert climb.best_eps == 19_800  # the step that held, at what was produced (committed was more)
    ratio = headroom_figures(climb, "bench headroom")[0]
    assert ratio.value == pytest.approx(100 * 19_800 / 70_000) and ratio.met is False


def test_the_ingest_benchmark_figures_come_from_its_own_result():
    from lab.bench.ingest import IngestBenchResult
    from lab.bench.record import ingest_figures

    result = IngestBenchResult(10_000, 60, 600_000, 600_000, 9_990, 1.2, 2.5, 2.9, 40, 1.4, 110_000, 1.0, 10_000)
    figures = {f.figure: f for f in ingest_figures(result, "bench ingest --rate 10000 --duration 60")}
    assert figures["freshness p95"].value == 2.5 and figures["freshness p95"].met
    assert figures["sustained / produced rate"].value == 99.9 and figures["sustained / produced rate"].met
    assert figures["raw ceiling (Kafka -> Parquet, no Spark)"].value == 110_000


def test_the_cdc_apply_at_scale_is_judged_by_process_tree_and_as_a_whole():
    from lab.bench.cdc_scale import ScaleResult
    from lab.bench.record import cdc_scale_figures

    result = ScaleResult(10_000_000, 300_000.0, 56_806.0, 108.0, 3_506.0,
                         snapshot_apply_parts_rss_mb={"driver": 654.0, "executor 0": 1_461.0, "executor 1": 1_471.0},
                         snapshot_apply_parts_pss_mb={"driver": 600.0, "executor 0": 1_000.0, "executor 1": 900.0,
                                                      "all": 2_500.0})
    result.sustained_cps, result.freshness_p50_s, result.freshness_p95_s = 999.0, 1.75, 3.04
    result.apply_parts_rss_mb = {"driver": 774.0, "executor 0": 1_423.0, "executor 1": 1_318.0}
    result.apply_parts_pss_mb = {"driver": 700.0, "executor 0": 1_100.0, "executor 1": 800.0, "all": 2_600.0}
    result.restart_s, result.apply_rss_mb = 32.8, 3_389.0
    result.fingerprints = {"mariadb": (1, 2), "duckdb": (1, 2), "trino": (1, 3)}
    result.sample_differences = {"duckdb": 0, "trino": 0}
    rows = {f.figure: f for f in cdc_scale_figures(result, "bench cdc --members 10000000", 1000)}
    assert rows["initial snapshot"].met and rows["sustained"].met
    assert not rows["apply freshness p95"].met  # 3.04 s against 3 s
    assert rows["apply peak RSS: executor 0"].value == 1_461.0 and rows["apply peak RSS: executor 0"].met
    assert not rows["apply peak RSS, all its processes"].met  # 3,506 MiB in the snapshot
    assert rows["apply peak PSS, all its processes"].value == 2_600.0 and rows["apply peak PSS, all its processes"].met
    assert rows["apply peak PSS: executor 0"].value == 1_100.0
    assert rows["largest executor's share of the executors' RSS"].value == pytest.approx(100 * 1_423 / 2_741)
    readers = rows["readers equal to MariaDB (rows, keys, sums, sampled keys)"]
    assert (readers.value, readers.goal, readers.met) == (1, "= 2", False)  # Trino's sums differ
