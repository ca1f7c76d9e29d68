"""The soak's goal arithmetic: which samples the query-latency drift is computed from.

The hour-long soak decides whether the tables stayed fast from these numbers, so a sample
that measures something else (the load ending) must not move them.
"""

from __future__ import annotations

from pathlib import Path

from lab.soak.run import SoakResult, _goals
from lab.soak.samples import Sample


def _sample(elapsed_s: float, cpu_ms: float, committed: int = 1000, under_load: bool = True,
            wall_ms: float = 100.0) -> Sample:
    return Sample(elapsed_s, committed, 5, 20, 0, 50, 10_000, wall_ms, 4.0, under_load=under_load, query_cpu_ms=cpu_ms)


def _result(samples: list[Sample], duration_s: float = 600) -> SoakResult:
    return SoakResult(samples, produced=1000, rows=1000, distinct_ids=1000, dead_letters=0,
                      out_dir=Path("."), latency_drift_limit=0.10, duration_s=duration_s)


def test_samples_after_the_load_stopped_do_not_count_towards_drift():
    under_load = [_sample(60 * i, ms) for i, ms in enumerate([100, 100, 104, 102, 100, 100], start=1)]
    after = [_sample(400, 250, under_load=False), _sample(460, 260, under_load=False)]
    result = _result(under_load + after)
    assert result.drift == 0.0
    assert _result(under_load + [_sample(400, 250), _sample(460, 260)]).drift > 1.0  # were they counted: +150 %


def test_drift_compares_the_last_half_with_the_first_and_skips_empty_windows():
    samples = [_sample(60, 900, committed=0)] + [_sample(60 * i, ms) for i, ms in
                                                 enumerate([100, 100, 110, 120, 130, 130], start=2)]
    assert round(_result(samples, duration_s=420).drift, 2) == 0.25  # 100 (120-180 s) -> 125 (240-420 s)


def test_a_run_of_two_hours_compares_its_last_hour_with_the_hour_before():
    """The longest span is an hour: in two hours that is the halves.

    The shape is the soak's: the snapshot log ramps for its retention (20 min here), then holds.
    The first hour's median is the plateau's, so the drift is the plateau's (+1 %).
    """
    cpu = [25 + i for i in range(7)] + [36, 35, 37, 36] * 8 + [36]  # 3-minute samples, minutes 3..120
    samples = [_sample(180 * i, ms) for i, ms in enumerate(cpu, start=1)]
    assert samples[-1].elapsed_s == 7200
    hours = _result(samples, duration_s=7200)
    assert hours.span_s == 3600 and abs(hours.drift) < 0.02  # 35.5 -> 36 ms


def test_a_run_of_an_hour_compares_its_last_30_minutes_with_the_30_before():
    """The same shape in one hour: the first half holds the ramp, and the goal (last 30 minutes within
    10 % of the 30 before) says so."""
    cpu = [25 + i for i in range(7)] + [36, 35, 37, 36] * 3 + [36]  # 3-minute samples, minutes 3..60
    samples = [_sample(180 * i, ms) for i, ms in enumerate(cpu, start=1)]
    hour = _result(samples, duration_s=3600)
    assert hour.span_s == 1800 and hour.drift_span == "the last 30 min against the 30 before"
    assert round(hour.drift, 2) == 0.22  # median 29.5 (minutes 3-30) -> 36 ms (minutes 33-60)
    assert _goals(hour) and "drifted +22%" in _goals(hour)[0]


def test_the_goal_reads_the_readers_cpu_and_reports_wall_time_beside_it():
    """Wall time doubling while the reader's work stays put is the cores being busy, not the table aging."""
    samples = [_sample(60 * i, 40, wall_ms=wall) for i, wall in enumerate([50, 50, 60, 90, 100, 100], start=1)]
    result = _result(samples, duration_s=360)
    assert result.drift == 0.0 and result.wall_drift == 1.0
    result.samples = [_sample(60 * i, cpu) for i, cpu in enumerate([40, 40, 44, 50, 52, 52], start=1)]
    assert round(result.drift, 2) == 0.30


def test_samples_and_plot_are_written_for_the_baseline_and_with_maintenance(tmp_path):
    """The no-maintenance baseline has no maintenance seconds to stack; its plot must still be drawn."""
    from lab.soak.run import _write

    for maintenance in (True, False):
        out = tmp_path / str(maintenance)
        out.mkdir()
        samples = [_sample(60 * i, 40) for i in range(1, 4)]
        _write(SoakResult(samples, produced=1000, rows=1000, distinct_ids=1000, dead_letters=0, out_dir=out,
                          latency_drift_limit=0.10, maintenance=maintenance))
        assert (out / "soak.png").stat().st_size > 10_000
        assert len((out / "soak.csv").read_text().splitlines()) == 1 + len(samples)


def test_the_baseline_is_held_to_exactly_once_only():
    """Without maintenance files pile up and queries slow down: that is the baseline's point, not its failure."""
    swamp = [_sample(60 * i, 30 * i) for i in range(1, 7)]
    for x in swamp:
        x.data_files_max_partition = 200 * x.data_files_max_partition
    maintained, baseline = _result(swamp), _result(swamp)
    baseline.maintenance = False
    assert [f.split(" ")[0] for f in _goals(maintained)] == ["live", "the"]  # files, then drift
    assert _goals(baseline) == []
    baseline.rows = baseline.distinct_ids = 999  # one event lost
    assert _goals(baseline) == ["1,000 produced but 999 rows + 0 dead letters committed"]
