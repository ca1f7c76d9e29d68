"""soak.csv → soak.png again: `lakehouse bench soak-plot` reads back exactly what the soak wrote."""

from __future__ import annotations

import csv
import subprocess
import sys
from dataclasses import asdict

from lab.soak.samples import Sample, read_samples


def _samples() -> list[Sample]:
    return [Sample(180.0 * i, 360_000 * i, 10 + i, 40 + i, 0, 100 * i, 20_000, 60.5, 3.9 + i / 10,
                   batch_s_mean=1.8, compact_s=9.5, expire_s=2.0 * (i > 1), under_load=i < 4,
                   query_cpu_ms=30.0 + i, writer_cpu_s=110.0, maintenance_cpu_s=20.0, broker_cpu_s=40.0 + i,
                   plan_s_mean=0.01, write_s_mean=0.9, dead_letters_s_mean=0.3)
            for i in range(1, 5)]


def test_a_soaks_samples_are_read_back_and_redrawn(tmp_path):
    samples = _samples()
    path = tmp_path / "soak.csv"
    with path.open("w", newline="") as fh:  # as the soak writes them
        writer = csv.DictWriter(fh, fieldnames=list(asdict(samples[0])))
        writer.writeheader()
        writer.writerows(asdict(x) for x in samples)
    assert read_samples(path) == samples

    done = subprocess.run([sys.executable, "-m", "cli", "bench", "soak-plot", str(path)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "soak.png").stat().st_size > 20_000


def test_a_csv_from_before_a_column_existed_still_reads(tmp_path):
    path = tmp_path / "soak.csv"
    rows = [{k: v for k, v in asdict(x).items() if k != "broker_cpu_s"} for x in _samples()]
    with path.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    assert [x.broker_cpu_s for x in read_samples(path)] == [0.0] * 4


def test_a_missing_csv_is_named():
    done = subprocess.run([sys.executable, "-m", "cli", "bench", "soak-plot", "/nonexistent/soak.csv"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode != 0 and "does not exist" in done.stderr
