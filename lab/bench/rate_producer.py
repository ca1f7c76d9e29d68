"""A plain, rate-controlled ClickEvent producer (no Locust) for benchmarks and the demo.

Holds a target events/s by producing in small paced bursts; librdkafka batches
underneath (linger.ms), which the local broker needs to be fast. Reports what it
achieved, and says so when it fell short of the target.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass

import typer

from lab.bench.process_cpu import process_cpu_seconds
from lakehouse import kafka_clients
from lakehouse.settings import load_settings
from loadgen.events import bad_payload, click_event, encode
from loadgen.key_space import SEED, KeySpace


@dataclass
class ProduceReport:
    target_rate: float
    sent: int
    bad: int
    seconds: float
    failed: int

    @property
    def achieved_rate(self) -> float:
        return self.sent / self.seconds if self.seconds else 0.0

    @property
    def reached(self) -> bool:
        return self.achieved_rate >= 0.95 * self.target_rate


def produce_at_rate(bootstrap: str, topic: str, rate: float, duration: float, bad_share: float = 0.0,
                    seed: int | None = None, tick: float = 0.02, extra: dict | None = None,
                    keys: KeySpace = SEED) -> ProduceReport:
    """Events at ``rate`` for ``duration`` s; ``extra`` fields (beyond the contract) go into every valid event;
    ``keys``: the members and products they name (``loadgen.key_space``)."""
    rng = random.Random(seed)
    failures = []
    # Idempotent: a batch retried after a slow acknowledgement is not written twice.
    # Delivery reports only for failures: a Python callback per delivered event would cost more than the event.
    producer = kafka_clients.producer(bootstrap, 20, {"batch.num.messages": 10_000,
                                                      "queue.buffering.max.messages": 1_000_000,
                                                      "delivery.report.only.error": True})

    def on_delivery(err, _msg):
        if err is not None:
            failures.append(err)

    began = time.monotonic()
    sent = bad = 0
    while (elapsed := time.monotonic() - began) < duration:
        due = int(rate * elapsed) - sent
        for _ in range(max(0, due)):
            if bad_share and rng.random() < bad_share:
                _, payload = bad_payload(rng)
                bad += 1
            else:
                event = click_event(rng, keys=keys)
                payload = encode({**event, **extra} if extra else event)
            try:
                producer.produce(topic, payload, on_delivery=on_delivery)
            except BufferError:
                producer.poll(0.05)
                producer.produce(topic, payload, on_delivery=on_delivery)
            sent += 1
        producer.poll(0)
        time.sleep(tick)
    producer.flush(60)
    return ProduceReport(rate, sent, bad, time.monotonic() - began, len(failures))


def main(
    rate: float = typer.Option(1000, help="Target events per second."),
    duration: float = typer.Option(10, help="Seconds to produce for."),
    bad_share: float = typer.Option(0.0, help="Share of deliberately bad events (0-1)."),
    topic: str = typer.Option(None, help="Topic (default: the click topic from settings)."),
    keys: str = typer.Option("", help="Where uid and productId come from: members=N,products=M[,skew=S,unknown=U] "
                                      "(`lakehouse load dims`); empty: the seed's keys."),
) -> None:
    """Produce ClickEvents at a fixed rate and report the rate achieved."""

    settings = load_settings()
    report = produce_at_rate(settings.kafka.bootstrap, topic or settings.kafka.clicks_topic, rate, duration, bad_share,
                             keys=KeySpace.parse(keys) if keys else SEED)
    typer.echo(f"produced {report.sent} events ({report.bad} bad) in {report.seconds:.1f}s = "
               f"{report.achieved_rate:,.0f}/s (target {rate:,.0f}/s), {report.failed} failed, "
               f"cpu {process_cpu_seconds():.2f}s")
    if not report.reached:
        typer.secho("target rate NOT reached: the producer is the bottleneck", fg="yellow", err=True)
        raise typer.Exit(1)


if __name__ == "__main__":
    typer.run(main)
