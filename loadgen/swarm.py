"""Start a bounded load on a running Locust master (Kubernetes): ``python -m loadgen.swarm``.

`make load RATE=... DURATION=...` runs this inside the master pod. It asks the master's
web API for a swarm at the given total event rate (the master splits it over its
workers), lets Locust stop it after the run time, then prints what was delivered: how far
the click topic's end offsets moved, read from Kafka once they stopped moving. Locust's own
count is printed beside it, but not trusted: its master reads the workers' stats every few
seconds, so at the first "stopped" state it can still miss the last ones.
"""

from __future__ import annotations

import argparse
import json
import time
import urllib.parse
import urllib.request

from lakehouse import kafka_clients
from lakehouse.settings import load_settings
from loadgen.run import parse_duration


def _post(url: str, form: dict[str, str]) -> dict:
    data = urllib.parse.urlencode(form).encode()
    with urllib.request.urlopen(urllib.request.Request(url, data=data), timeout=10) as resp:  # noqa: S310 - loopback
        return json.loads(resp.read() or b"{}")


def _get(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=10) as resp:  # noqa: S310 - loopback
        return json.loads(resp.read())


def _wait_for_workers(master: str, expected: int, timeout_s: float = 120.0) -> None:
    """Locust's --expect-workers applies only to headless runs: a swarm started through the web UI before
    the workers joined would run on none of them, so wait for them here."""
    deadline = time.monotonic() + timeout_s
    while (joined := _get(f"{master}/stats/requests").get("worker_count", 0)) < expected:
        if time.monotonic() > deadline:
            raise SystemExit(f"error: {joined} of {expected} Locust workers joined the master in {timeout_s:.0f} s "
                             "(kubectl logs deploy/locust-worker)")
        time.sleep(2)


def settled_records(bootstrap: str, topic: str, quiet_s: float = 3.0, timeout_s: float = 60.0) -> int:
    """The topic's records once its end offsets have not moved for ``quiet_s`` (the last batches landed)."""
    last, since, deadline = -1, time.monotonic(), time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        now = kafka_clients.records_in_topic(bootstrap, topic)
        if now != last:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= quiet_s:
            return now
        time.sleep(0.5)
    return last


def main() -> None:
    parser = argparse.ArgumentParser(description="Run a bounded load through the Locust master's web API.")
    parser.add_argument("--rate", type=float, required=True, help="total ClickEvents/s over all workers")
    parser.add_argument("--duration", default="60s", help="run time: 60, 60s, 5m, 1h")
    parser.add_argument("--users", type=int, default=8, help="Locust users (the rate is paced, not per user)")
    parser.add_argument("--bad-share", type=float, default=0.01, help="share of deliberately bad events")
    parser.add_argument("--master", default="http://127.0.0.1:8089", help="the master's web UI")
    parser.add_argument("--workers", type=int, default=1, help="wait until this many workers joined the master")
    parser.add_argument("--wait-workers", type=float, default=120.0, help="seconds to wait for them")
    args = parser.parse_args()
    seconds = parse_duration(args.duration)
    kafka = load_settings().kafka
    _wait_for_workers(args.master, args.workers, args.wait_workers)
    before = settled_records(kafka.bootstrap, kafka.clicks_topic)
    _post(f"{args.master}/swarm", {
        "user_count": str(args.users), "spawn_rate": str(args.users), "run_time": f"{int(seconds)}s",
        "event_rate": str(args.rate), "bad_share": str(args.bad_share),
    })
    print(f"swarm started: {args.rate:,.0f} events/s for {int(seconds)} s over the master's workers")
    deadline = time.monotonic() + seconds + 30
    stats: dict = {}
    while time.monotonic() < deadline:
        time.sleep(5)
        stats = _get(f"{args.master}/stats/requests")
        print(f"  {stats.get('state')}: {stats.get('total_rps', 0):,.0f} events/s, "
              f"{stats.get('user_count', 0)} users, {stats.get('worker_count', 0)} workers")
        if stats.get("state") in ("stopped", "ready"):
            break
    total = next((s for s in stats.get("stats", []) if s.get("name") == "Aggregated"), {})
    delivered = settled_records(kafka.bootstrap, kafka.clicks_topic) - before
    print(f"delivered {delivered:,} events (the end offsets of {kafka.clicks_topic} moved by that much); Locust "
          f"counted {total.get('num_requests', 0) - total.get('num_failures', 0):,}, "
          f"{total.get('num_failures', 0):,} failed")


if __name__ == "__main__":
    main()
