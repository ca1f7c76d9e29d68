"""Locust load: ClickEvents into Kafka and changes into the shop database.

    locust -f loadgen/locustfile.py --event-rate 5000            # web UI on :8089
    locust -f loadgen/locustfile.py,loadgen/shapes/ramp.py ...   # a rate shape
    lakehouse load clicks --rate 5000 --duration 60s --shape ramp       # headless, with reports

The total event rate is held by a per-process pacer whatever the user count; with
workers, the master gives each worker its share. Every delivery report of the Kafka
producer becomes a Locust request event, so Locust's statistics show produce
latency, failures and throughput per kind (valid / bad).
"""

from __future__ import annotations

import random
import time

import gevent
from locust import User, between, constant, events, task
from locust.runners import MasterRunner, WorkerRunner

from loadgen import session
from loadgen.db_changes import ShopChanges


@events.init_command_line_parser.add_listener
def _options(parser):
    group = parser.add_argument_group("lakehouse")
    # Defaults of the type the option parses to: Locust's web UI converts a swarm form's value with
    # type(default), so an int default would turn "2000.0" from `make load` into a ValueError (HTTP 500).
    group.add_argument("--event-rate", type=float, default=1000.0, env_var="LOCUST_EVENT_RATE",
                       help="Target ClickEvents/s, all users together.")
    group.add_argument("--bad-share", type=float, default=0.0, env_var="LOCUST_BAD_SHARE",
                       help="Share of deliberately bad events (0-1).")
    group.add_argument("--batch-max", type=int, default=500, help="Most events one task iteration sends.")
    group.add_argument("--db-change-rate", type=float, default=0.0, env_var="LOCUST_DB_CHANGE_RATE",
                       help="Database changes/s (0 = none).")
    group.add_argument("--new-field", action="append", default=[], metavar="NAME:TYPE",
                       help="A field beyond the contract the events start carrying, as an app release adds one "
                            "(type string, integer, number or boolean); repeatable.")
    group.add_argument("--rollout", default="100%",
                       help="Share of events with the new fields, rising over the run: 10%%->100%%.")
    group.add_argument("--keys", default="", metavar="members=N,products=M,skew=S",
                       help="Draw uid and productId from loaded dimensions (lakehouse load dims); "
                            "empty: the seed's keys.")
    group.add_argument("--summary-file", default="", help="Write the final per-kind counts here (JSON) on exit.")


@events.init.add_listener
def _init(environment, **_):
    session.init(environment)
    if isinstance(environment.runner, WorkerRunner):
        environment.runner.register_message("lakehouse_share", lambda msg, **_: session.pacer().set_share(msg.data))


@events.test_start.add_listener
def _start(environment, **_):
    if isinstance(environment.runner, MasterRunner):
        share = 1.0 / max(1, environment.runner.worker_count)
        environment.runner.send_message("lakehouse_share", share)


@events.test_stop.add_listener
def _stop(environment, **_):
    session.flush()


@events.quit.add_listener
def _quit(**_):
    # Locust's CSV is rewritten every few seconds and not at exit, so it misses the deliveries
    # acknowledged by the last flush; this summary is taken after them.
    session.write_summary()


class ClickEventUser(User):
    """Produces ClickEvents as fast as the pacer allows (the pacer holds the total rate)."""

    wait_time = constant(0)

    @task
    def produce_clicks(self):
        n = session.pacer().take(self.environment.parsed_options.batch_max)
        if n == 0:
            gevent.sleep(0.005)
            return
        session.produce_clicks(n)


class DatabaseChangeUser(User):
    """Inserts, updates and deletes products and members, as an application would."""

    fixed_count = 1
    wait_time = between(0.0, 0.0)

    def on_start(self):
        self.rate = self.environment.parsed_options.db_change_rate
        self.changes = ShopChanges(session.settings(), random.Random())

    @task
    def change(self):
        if self.rate <= 0:
            gevent.sleep(1.0)
            return
        started = time.perf_counter()
        name, error = self.changes.random_change()
        self.environment.events.request.fire(
            request_type="mysql", name=name, response_time=(time.perf_counter() - started) * 1000,
            response_length=0, exception=error, context={})
        gevent.sleep(max(0.0, 1.0 / self.rate - (time.perf_counter() - started)))
