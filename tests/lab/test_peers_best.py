"""`bench peers` compares best against best: each system's settings longest first, stopping where it stops keeping
up, and the freshest setting that kept up of each system side by side (lab/bench/peers.py)."""

from __future__ import annotations

from lab.bench import peers
from lab.bench.peers import PeerResult, best_line, best_of, flink, kept_up, longest_first, this_pipeline


def _result(system: str, family: str, p95: float, sustained: float = 10_000, rows: int = 1000) -> PeerResult:
    return PeerResult(system, 10_000, 1000, p95 / 2, p95, p95 * 1.2, sustained, 50, 6, 60, rows, rows, family=family)


def test_settings_run_longest_first_and_the_freshest_that_kept_up_is_each_systems_best():
    systems = [this_pipeline(), this_pipeline(0.25), flink(0.25), flink(1), this_pipeline(0.5), flink(0.5)]
    assert [s.name for s in longest_first(systems)] == [
        "this pipeline", "this pipeline (trigger 0.5 s)", "this pipeline (trigger 0.25 s)",
        "Flink (checkpoint 1 s)", "Flink (checkpoint 0.5 s)", "Flink (checkpoint 0.25 s)"]
    ours = [_result("this pipeline", "this pipeline", 1.6), _result("this pipeline (trigger 0.5 s)", "this pipeline", 1.3),
            _result("this pipeline (trigger 0.25 s)", "this pipeline", 0.9, sustained=7_000)]  # fell behind
    theirs = [_result("Flink (checkpoint 1 s)", "Flink", 1.2), _result("Flink (checkpoint 0.5 s)", "Flink", 0.7),
              _result("Flink (checkpoint 0.25 s)", "Flink", 0.6, rows=990)]  # lost events: not a best
    assert not kept_up(ours[2]) and not kept_up(theirs[2])
    best = {r.family: r for r in best_of(ours + theirs)}
    assert best["this pipeline"].system == "this pipeline (trigger 0.5 s)"
    assert best["Flink"].system == "Flink (checkpoint 0.5 s)"
    line = best_line(best["this pipeline"], list(best.values()))
    assert line["p95 / best other's"] == f"{1.3 / 0.7:.2f}x"


def test_a_system_that_falls_behind_is_not_tried_shorter(monkeypatch, tmp_path):
    tried = []

    def run_one(settings, system, rate, duration, progress, keep):
        tried.append(system.name)
        behind = system.setting == 0.5
        return _result(system.name, "", 1.0, sustained=5_000 if behind else 10_000)

    monkeypatch.setattr(peers, "run_one", run_one)
    results = peers.run(None, [flink(1), flink(0.5), flink(0.25), this_pipeline()], [10_000], 60, progress=lambda _: None)
    assert tried == ["Flink (checkpoint 1 s)", "Flink (checkpoint 0.5 s)", "this pipeline"]
    assert [r.family for r in results] == ["Flink", "Flink", "this pipeline"]
