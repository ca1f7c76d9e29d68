"""`make up`'s end-to-end check decides on what it saw: a count that fails is a failure, never a pass.

No cluster here: the check's waiting logic is run with counting functions that answer as Trino
would in each case (the table not there yet, a failure, a partial count), on a virtual clock.
"""

from __future__ import annotations

import pytest

from deploy.k8s.end_to_end import CheckFailed, Cluster, Limits, parse_delivered, wait_for_table, wait_until_counted
from deploy.k8s.validate import render
from tests.support.clock import Clock


def answers(*script):
    """A count that gives each scripted answer in turn (an exception is raised), then the last one forever."""
    items = list(script)

    def count() -> int:
        item = items.pop(0) if len(items) > 1 else items[0]
        if isinstance(item, Exception):
            raise item
        return item

    return count


LIMITS = Limits(table_wait_s=60, count_wait_s=60, interval_s=5, failures_in_a_row=3)


def test_a_failing_count_fails_the_check_instead_of_passing_it():
    clock = Clock()
    failing = answers(100, CheckFailed("Trino: connection refused"))
    with pytest.raises(CheckFailed, match="3 times in a row"):
        wait_until_counted(failing, before=100, delivered=50, limits=LIMITS, sleep=clock.sleep, clock=clock)


def test_a_single_failed_count_is_retried():
    clock = Clock()
    flaky = answers(CheckFailed("OOM-killed CLI"), 120, 150)
    assert wait_until_counted(flaky, before=100, delivered=50, limits=LIMITS, sleep=clock.sleep, clock=clock) == 10


def test_a_partial_count_times_out_naming_what_was_counted():
    clock = Clock()
    with pytest.raises(CheckFailed, match="counts 30 of the 50 delivered events"):
        wait_until_counted(answers(130), before=100, delivered=50, limits=LIMITS, sleep=clock.sleep, clock=clock)


def test_the_click_table_is_waited_for_until_it_exists():
    clock = Clock()
    missing = CheckFailed("Table 'iceberg.ods_behavior.clickevent' does not exist")
    assert wait_for_table(answers(missing, missing, 0), LIMITS, sleep=clock.sleep, clock=clock) == 0
    assert clock.now == 10
    later = Clock()
    with pytest.raises(CheckFailed, match="could not count the click table for 60 s"):
        wait_for_table(answers(missing), LIMITS, sleep=later.sleep, clock=later)


def test_the_delivered_figure_is_read_from_the_load_output():
    out = "swarm started\n  stopped: 0 events/s\ndelivered 6,012 events (the end offsets of clickevents moved ...)\n"
    assert parse_delivered(out) == 6012
    with pytest.raises(CheckFailed, match="no delivered figure"):
        parse_delivered("swarm started\n")


def test_the_cli_beside_the_coordinator_runs_on_a_small_heap():
    """The check's CLI runs in the coordinator's container: its heap and the server's must fit the limit."""
    docs = render()
    coordinator = next(d for d in docs if d["kind"] == "Deployment" and d["metadata"]["name"] == "trino-coordinator")
    limit = coordinator["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["memory"]
    server_heap = next(d for d in docs if d["kind"] == "ConfigMap"
                       and d["metadata"]["name"] == "trino-coordinator-config")["data"]["jvm.config"]
    heap_mb = int(server_heap.split("-Xmx")[1].split("M")[0])
    cli = " ".join(Cluster.count_command())
    cli_mb = int(cli.split("-Xmx")[1].split("m")[0])
    assert limit == "1536Mi" and heap_mb + cli_mb + 512 <= 1536, "server heap + CLI heap + off-heap fit the limit"
    assert "JAVA_TOOL_OPTIONS=-Xmx" in cli
