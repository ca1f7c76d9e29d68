"""Per-process state of a Locust run: settings, one Kafka producer, the pacer, metrics.

Locust users are greenlets; they share one confluent-kafka producer per process
(librdkafka batches across them). Delivery reports are turned into Locust request
events; the master (or a single local process) also exports Prometheus counters
built from Locust's aggregated statistics, so they cover every worker.
"""

from __future__ import annotations

import json
import random
import time
from functools import partial

from prometheus_client import REGISTRY, start_http_server
from prometheus_client.core import CounterMetricFamily
from prometheus_client.registry import Collector

from lakehouse import kafka_clients
from lakehouse.settings import Settings, load_settings
from loadgen.events import bad_payload, click_event, encode
from loadgen.key_space import KeySpace
from loadgen.pacing import Pacer
from loadgen.rollout import NewField, Rollout, with_new_fields

_state: dict = {}


def settings() -> Settings:
    return _state["settings"]


def pacer() -> Pacer:
    return _state["pacer"]


def _profile(environment):
    """The rate at each moment, read from the options at that moment: a swarm started from the web UI or
    ``loadgen.swarm`` sets ``event_rate`` after this process started (the master passes it to its workers)."""

    def rate(seconds: float) -> float:
        opts = environment.parsed_options
        shape = environment.shape_class
        if shape is not None and hasattr(shape, "rate_at"):
            return shape.rate_at(seconds, float(opts.event_rate), float(opts.run_time or 60))
        return float(opts.event_rate)

    return rate


class LocustStatsCollector(Collector):
    """lakehouse_loadgen_events_total{kind, outcome} from Locust's (cluster-wide) statistics."""

    def __init__(self, environment):
        self.environment = environment

    def collect(self):
        family = CounterMetricFamily("lakehouse_loadgen_events", "Events sent by the load generator.",
                                     labels=["kind", "outcome"])
        for (name, _method), entry in list(self.environment.stats.entries.items()):
            family.add_metric([name, "delivered"], entry.num_requests - entry.num_failures)
            family.add_metric([name, "failed"], entry.num_failures)
        yield family


def init(environment) -> None:
    # deferred: importing locust patches the standard library (gevent): only inside a Locust run
    from locust.runners import WorkerRunner

    s = load_settings()
    opts = environment.parsed_options
    _state.update(settings=s, environment=environment, rng=random.Random(), pacer=Pacer(_profile(environment)),
                  new_fields=tuple(NewField.parse(f) for f in opts.new_field), rollout=Rollout.parse(opts.rollout),
                  keys=KeySpace.parse(opts.keys),
                  duration=float(opts.run_time or 60), started=time.monotonic())
    _state["producer"] = kafka_clients.producer(s.kafka.bootstrap, 10, {
        "batch.num.messages": 10_000, "queue.buffering.max.messages": 500_000})
    if not isinstance(environment.runner, WorkerRunner) and "metrics" not in _state:
        REGISTRY.register(LocustStatsCollector(environment))
        try:
            start_http_server(s.metrics.loadgen_port, addr=s.metrics.host)
        except OSError as exc:
            print(f"warning: no /metrics on {s.metrics.host}:{s.metrics.loadgen_port}: {exc.strerror}")
        _state["metrics"] = True


def _delivered(started: float, kind: str, size: int, err, _msg) -> None:
    _state["environment"].events.request.fire(
        request_type="kafka", name=kind, response_time=(time.perf_counter() - started) * 1000,
        response_length=size, exception=None if err is None else RuntimeError(str(err)), context={})


def produce_clicks(n: int) -> None:
    """Send n events (a share of them bad, as configured) and serve delivery reports."""
    env, rng, producer = _state["environment"], _state["rng"], _state["producer"]
    topic, bad_share = settings().kafka.clicks_topic, env.parsed_options.bad_share
    fields = _state["new_fields"]
    share = _state["rollout"].share(time.monotonic() - _state["started"], _state["duration"]) if fields else 0.0
    for _ in range(n):
        if bad_share and rng.random() < bad_share:
            kind, payload = "bad_click", bad_payload(rng)[1]
        else:
            kind, payload = "click", encode(with_new_fields(click_event(rng, keys=_state["keys"]), fields, share, rng))
        callback = partial(_delivered, time.perf_counter(), kind, len(payload))
        try:
            producer.produce(topic, payload, on_delivery=callback)
        except BufferError:
            producer.poll(0.05)
            producer.produce(topic, payload, on_delivery=callback)
    producer.poll(0)


def flush() -> None:
    if "producer" in _state:
        _state["producer"].flush(30)


def write_summary() -> None:
    """Per-kind delivered/failed counts and produce latency, from the final statistics."""
    # deferred: importing locust patches the standard library (gevent): only inside a Locust run
    from locust.runners import WorkerRunner

    env = _state.get("environment")
    if env is None or isinstance(env.runner, WorkerRunner) or not env.parsed_options.summary_file:
        return
    summary = {
        name: {"type": method, "delivered": e.num_requests - e.num_failures, "failed": e.num_failures,
               "p50_ms": e.get_response_time_percentile(0.5), "p99_ms": e.get_response_time_percentile(0.99)}
        for (name, method), e in env.stats.entries.items()
    }
    with open(env.parsed_options.summary_file, "w") as fh:
        json.dump(summary, fh, indent=2)
