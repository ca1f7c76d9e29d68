"""Steady background load that remembers what the broker acknowledged.

The chaos suite needs ground truth independent of the pipeline: every ClickEvent the
broker confirmed (eventId -> produce time) and every database change made. Faults
make some sends fail; those are counted, not retried by hand (the producer is
idempotent and retries by itself while the broker restarts).
"""

from __future__ import annotations

import logging
import random
import threading
import time

from confluent_kafka import KafkaError, Producer

from lakehouse import kafka_clients
from lakehouse.settings import Settings
from loadgen.db_changes import ShopChanges
from loadgen.events import bad_payload, click_event, encode

log = logging.getLogger(__name__)


class SteadyClicks:
    """ClickEvents at ``rate`` per second from a thread, with a share of bad ones."""

    def __init__(self, settings: Settings, rate: float, bad_share: float = 0.01, seed: int = 5):
        self.topic, self.rate, self.bad_share = settings.kafka.clicks_topic, rate, bad_share
        self.rng = random.Random(seed)
        self.bootstrap, self.linger_ms = settings.kafka.bootstrap, settings.kafka.producer_linger_ms
        self.producer = self._new_producer()
        self._fenced = False
        self.acked: dict[str, int] = {}  # eventId -> produce time (epoch ms)
        self.bad_acked = 0
        self.failed = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="steady-clicks", daemon=True)

    def _new_producer(self) -> Producer:
        return kafka_clients.producer(self.bootstrap, self.linger_ms, {"message.timeout.ms": 300_000},
                                      log_level=kafka_clients.SILENT)

    def start(self) -> SteadyClicks:
        self._thread.start()
        return self

    def stop(self, flush_timeout: float = 300.0) -> None:
        self._stop.set()
        self._thread.join()
        with self._lock:
            left = self.producer.flush(flush_timeout)
        if left:
            log.error("%d click events still unacknowledged after %.0fs", left, flush_timeout)

    def send(self, event: dict) -> None:
        """Send one given event (e.g. with a skewed clock); acknowledged ones land in ``acked``."""
        with self._lock:
            self._produce(encode(event), event["eventId"], event["updateTime"])

    def _produce(self, payload: bytes, event_id: str | None, at_ms: int) -> None:
        def delivered(err, _msg, event_id=event_id, at_ms=at_ms):
            if err is not None:
                self.failed += 1
                self._fenced = self._fenced or err.fatal() or err.code() == KafkaError.PRODUCER_FENCED
            elif event_id is None:
                self.bad_acked += 1
            else:
                self.acked[event_id] = at_ms

        while True:
            try:
                self.producer.produce(self.topic, payload, on_delivery=delivered)
                return
            except BufferError:
                self.producer.poll(0.1)

    def _run(self) -> None:
        began, sent = time.monotonic(), 0
        while not self._stop.is_set():
            due = int(self.rate * (time.monotonic() - began)) - sent
            with self._lock:
                if self._fenced:  # the broker fenced this producer id after an outage: carry on with a new one
                    log.warning("click producer fenced by the broker; continuing with a new producer id")
                    self.producer.purge()
                    self.producer = self._new_producer()
                    self._fenced = False
                for _ in range(max(0, due)):
                    if self.rng.random() < self.bad_share:
                        self._produce(bad_payload(self.rng)[1], None, int(time.time() * 1000))
                    else:
                        event = click_event(self.rng)
                        self._produce(encode(event), event["eventId"], event["updateTime"])
                    sent += 1
                self.producer.poll(0)
            time.sleep(0.05)


class SteadyChanges:
    """Random shop-database changes at ``rate`` per second from a thread (see ShopChanges).

    Changes that fail while the database restarts are counted and simply not made;
    the comparison at the end is against what the database really holds.
    """

    def __init__(self, settings: Settings, rate: float, seed: int = 6):
        self.settings, self.rate, self.seed = settings, rate, seed
        self.made = 0
        self.failed = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="steady-changes", daemon=True)

    def start(self) -> SteadyChanges:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        rng, shop = random.Random(self.seed), None
        while not self._stop.wait(1.0 / self.rate):
            try:
                shop = shop or ShopChanges(self.settings, rng)
            except Exception:  # noqa: BLE001 - the database is restarting: try again next tick
                self.failed += 1
                continue
            _, error = shop.random_change()
            if error is None:
                self.made += 1
            else:
                self.failed += 1
                shop = None  # reconnect: the connection may be the thing that broke
