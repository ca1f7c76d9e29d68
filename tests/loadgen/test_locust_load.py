"""Locust load generation against the real broker and database."""

from __future__ import annotations

import json
import threading
import urllib.request
import uuid

import pytest
from confluent_kafka.admin import NewTopic
from pymysqlreplication import BinLogStreamReader
from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent

from deploy.local.services.broker import admin_client
from lakehouse.source_database import connect as mariadb_connect
from loadgen.run import expected_events, parse_duration, read_summary, run
from pipeline.clicks.validate import Limits, classify
from tests.support.kafka import consume_all


@pytest.fixture
def topic(settings, monkeypatch):
    name = f"load_{uuid.uuid4().hex[:8]}"
    admin = admin_client(settings)
    admin.create_topics([NewTopic(name, 3, 1)])[name].result()
    monkeypatch.setenv("LAKEHOUSE_KAFKA__CLICKS_TOPIC", name)
    return name


def scrape_produced(settings, stop: threading.Event, seen: list[float]) -> None:
    """Poll the load generator's /metrics while it runs; keep the delivered-clicks counter."""
    url = f"http://{settings.metrics.host}:{settings.metrics.loadgen_port}/metrics"
    while not stop.is_set():
        try:
            text = urllib.request.urlopen(url, timeout=1).read().decode()
            for line in text.splitlines():
                if line.startswith('lakehouse_loadgen_events_total{kind="click",outcome="delivered"}'):
                    seen.append(float(line.split()[-1]))
        except OSError:
            pass
        stop.wait(0.5)


def test_ten_seconds_at_a_set_rate(settings, topic, tmp_path):
    stop, seen = threading.Event(), []
    scraper = threading.Thread(target=scrape_produced, args=(settings, stop, seen))
    scraper.start()
    try:
        result = run(rate=1500, duration=10, shape="constant", bad_share=0.05, users=3, workers=1,
                     db_change_rate=0, out=tmp_path)
    finally:
        stop.set()
        scraper.join()
    assert seen and max(seen) > 0.5 * 15_000 * 0.95, "Prometheus saw the produced-events counter grow"
    assert result.failed == 0
    # never more than asked (the limiter's promise); fewer on a busy machine is not a fault, `bench ingest` measures it
    assert 0 < result.delivered <= 1.05 * 15_000, result
    values = consume_all(settings, topic, 3)
    # The summary is taken after the producer's last flush, so it counts what the broker acknowledged.
    assert len(values) == result.delivered, "the topic holds exactly what was delivered"
    limits = Limits()
    good, bad = [], 0
    for value in values:
        now_ms = json.loads(value)["updateTime"] if error_free(value) else 0
        fields, error = classify(value, now_ms, limits)
        if error is None:
            good.append(fields["event_id"])
        else:
            bad += 1
    assert len(good) == len(set(good)), "every eventId is unique"
    assert 0.03 <= bad / len(values) <= 0.07, f"bad share {bad / len(values):.3f}, asked 0.05"
    assert (tmp_path / "report.html").exists() and (tmp_path / "locust_stats.csv").exists()


def error_free(value: bytes) -> bool:
    try:
        return isinstance(json.loads(value).get("updateTime"), int)
    except (ValueError, AttributeError):
        return False


def test_rate_control_two_rates_differ_accordingly(settings, topic, tmp_path):
    slow = run(1000, 6, "constant", 0.0, 4, 1, 0, tmp_path / "slow")
    fast = run(3000, 6, "constant", 0.0, 4, 1, 0, tmp_path / "fast")
    # each run stays within what it asked for, and asking for more delivers more (exact rates are benchmark figures)
    assert slow.delivered <= 1.05 * 6_000 and fast.delivered <= 1.05 * 18_000, (slow.delivered, fast.delivered)
    assert fast.delivered > 1.5 * slow.delivered, (slow.delivered, fast.delivered)


def test_database_user_changes_land_in_the_binlog(settings, topic, tmp_path):
    m = settings.mariadb
    with mariadb_connect(settings) as conn, conn.cursor() as cur:
        cur.execute("SELECT @@gtid_binlog_pos")
        start = cur.fetchone()[0]
    result = run(10, 6, "constant", 0.0, 2, 1, db_change_rate=30, out=tmp_path)  # 1 db + 1 click user
    assert any(k["type"] == "mysql" and k["delivered"] > 0 for k in read_summary(tmp_path).values())
    stream = BinLogStreamReader(
        connection_settings={"host": m.host, "port": m.port, "user": m.cdc_user,
                             "password": m.cdc_password.get_secret_value()},
        server_id=4343, is_mariadb=True, auto_position=start, blocking=False,
        only_events=[WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent], only_schemas=[m.database])
    try:
        tables = [event.table for event in stream]
    finally:
        stream.close()
    assert len(tables) >= 20, "about 30 changes/s for 6 s should leave many row events"
    assert set(tables) <= {"products", "user_member"}
    assert result.delivered > 0


def test_shapes_and_durations():
    assert parse_duration("1h30m") == 5400 and parse_duration("90") == 90 and parse_duration("2m") == 120
    assert expected_events("constant", 100, 10) == pytest.approx(1000)
    assert expected_events("ramp", 100, 10) == pytest.approx(550, rel=0.01)
    assert expected_events("step", 100, 8) == pytest.approx(500, rel=0.01)
    assert expected_events("spike", 100, 10) == pytest.approx(440, rel=0.01)
    with pytest.raises(ValueError, match="shapes: constant, step, ramp, spike"):
        expected_events("zigzag", 1, 1)


def test_a_new_field_rolls_out_over_the_run(settings, topic, tmp_path):
    """--new-field deviceType:string --rollout 0%->100%: few events carry it at first, nearly all at the end."""
    result = run(rate=1000, duration=10, shape="constant", bad_share=0.0, users=2, workers=1, db_change_rate=0,
                 out=tmp_path, new_fields=("deviceType:string", "appVersion:integer"), rollout="0%->100%")
    assert result.failed == 0
    events = sorted((json.loads(v) for v in consume_all(settings, topic, 3)), key=lambda e: e["updateTime"])
    assert len(events) == result.delivered
    third = len(events) // 3
    early = sum("deviceType" in e for e in events[:third]) / third
    late = sum("deviceType" in e for e in events[-third:]) / third
    assert early < 0.3 < 0.65 < late, (early, late)
    carrying = [e for e in events if "deviceType" in e]
    assert all(e["deviceType"] in {"ios", "android", "web", "tv"} and isinstance(e["appVersion"], int)
               for e in carrying)


def test_a_swarm_through_the_web_ui_waits_for_its_workers(settings, topic, tmp_path):
    """The cluster's way (`make load`, the end-to-end check of `make up`): a master in UI mode, where
    Locust ignores --expect-workers; loadgen.swarm waits for the worker, then the events arrive."""
    import subprocess
    import sys
    import time

    from deploy.local.processes import free_port
    from loadgen.run import LOADGEN_DIR

    web = free_port()
    master_url = f"http://127.0.0.1:{web}"
    swarm = [sys.executable, "-m", "loadgen.swarm", "--rate", "200", "--duration", "5s", "--bad-share", "0",
             "--users", "2", "--master", master_url]
    locust = [sys.executable, "-m", "locust", "-f", str(LOADGEN_DIR / "locustfile.py"), "--loglevel", "WARNING"]
    port = free_port()
    master = subprocess.Popen([*locust, "--master", "--web-host", "127.0.0.1", "--web-port", str(web),
                               "--master-bind-host", "127.0.0.1", "--master-bind-port", str(port)],
                              stdout=subprocess.DEVNULL, stderr=(tmp_path / "master.log").open("w"))
    worker = None
    try:
        deadline = time.monotonic() + 30
        while True:  # the web UI answers
            try:
                urllib.request.urlopen(f"{master_url}/stats/requests", timeout=2)
                break
            except OSError:
                assert time.monotonic() < deadline, (tmp_path / "master.log").read_text()[-2000:]
                time.sleep(0.5)
        alone = subprocess.run([*swarm, "--wait-workers", "3"], capture_output=True, text=True, timeout=60)
        assert alone.returncode != 0 and "0 of 1 Locust workers joined" in alone.stderr
        waiting = subprocess.Popen(swarm, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(3)  # the swarm is waiting: the worker joins only now
        worker = subprocess.Popen([*locust, "--worker", "--master-host", "127.0.0.1", "--master-port", str(port)],
                                  stdout=subprocess.DEVNULL, stderr=(tmp_path / "worker.log").open("w"))
        out, err = waiting.communicate(timeout=120)
        assert waiting.returncode == 0, err
        delivered = int(next(line for line in out.splitlines() if line.startswith("delivered")).split()[1]
                        .replace(",", ""))
        # the swarm's rate, not the worker's default of 1,000 events/s (the pacer reads the rate the swarm set)
        assert 0.5 * 200 * 5 <= delivered <= 1.5 * 200 * 5, delivered
        assert len(consume_all(settings, topic, 3)) == delivered
    finally:
        for process in (worker, master):
            if process is not None:
                process.terminate()
                process.wait(timeout=30)
