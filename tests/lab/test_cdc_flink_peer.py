"""Seed 004's Flink upsert sink as a CDC peer, on a real binlog, broker, Flink mini-cluster, metastore and Trino:
it must be right before its figures mean anything, through a kill -9 too."""

from __future__ import annotations

import pytest

from lab.bench.cdc_scale import run
from lab.bench.read_cost import ReadCost

pytestmark = pytest.mark.stack


def test_flink_peer_upserts_every_change_and_readers_say_what_they_can_read(settings):
    result = run(settings, 20_000, rate=200, duration=15, progress=lambda _: None, engines=("trino",),
                 apply="flink-peer")
    # the timed restart (kill -9, started again from its newest checkpoint) is part of every run
    assert result.kills == ["dims after the changes"] and result.restart_s < 600
    assert result.fingerprints["trino"] == result.fingerprints["mariadb"], result.fingerprints
    rows, _, _, marks, _ = result.fingerprints["mariadb"]
    assert rows > 19_000 and marks > 0
    assert result.sample_differences == {"trino": 0}
    assert result.changes > 0 and 0 < result.freshness_p50_s <= result.freshness_p95_s <= result.freshness_p99_s
    # every upsert names its key in an equality delete: Trino applies them, PyIceberg refuses the table
    assert result.delete_files_end > 0
    assert isinstance(result.readers["trino"], ReadCost)
    assert isinstance(result.readers["pyiceberg"], str) and result.readers["pyiceberg"].startswith("cannot read")
