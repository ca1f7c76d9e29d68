"""A Spark job whose tasks stay up for the life of a micro-batch job: the driver feeds them each batch's work.

A Spark job per micro-batch pays, every batch, for what does not depend on the batch's size:
planning the job, launching its tasks, a Python worker handing rows to the JVM and back
(docs/performance.md, "A batch without a Spark job"). Here one Spark job starts once, with
one task per slot the job is given. Each task opens a connection to a listener on the
driver (``multiprocessing.connection``, authenticated with a key made for this job), builds
its worker (``start()``: a Kafka consumer, caches; whatever it keeps between batches), and
then answers every message the driver sends with ``worker(message)`` until the driver sends
``None``. The work stays in Spark tasks on the executors: more executors, more tasks.

A task that raises answers with the error (the driver raises ``StandingTaskError`` with the
task's traceback); a task that dies, or does not answer within ``answer_seconds``, ends the
batch with a ``TransientError``. In either case the job's ``recover()`` closes these tasks
(cancelling their Spark job) and starts new ones, which begin from nothing kept. A task
that Spark retries after the tasks started (cluster mode) finds no one accepting: it waits,
holding its slot, until that recovery cancels the job.

The tasks hold their slots while they wait for work: an application that runs other jobs
beside them needs slots for those too (``spark_session``: local mode adds the standing
tasks' slots to the cores'; Kubernetes gives the executors two slots each).
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import secrets
import socket
import threading
import time
import traceback
from collections.abc import Callable
from multiprocessing.connection import Client, Connection, Listener, wait
from typing import Any, cast

from lakehouse.errors import TransientError

log = logging.getLogger(__name__)

#: seconds the driver waits for every task to connect (a Python worker forked, the task launched)
CONNECT_SECONDS = 120.0


class StandingTaskError(TransientError):
    """A standing task raised while doing its share of a batch; the message ends with the task's own error."""


def driver_address(spark, local_host: str) -> str:
    """The address the tasks reach the driver at: ``local_host`` in local mode; in cluster mode the driver's own
    pod address (``spark.driver.bindAddress``, which the driver's entrypoint sets), else ``spark.driver.host``."""
    conf = spark.sparkContext.getConf()
    if conf.get("spark.master", "").startswith("local"):
        return local_host
    return conf.get("spark.driver.bindAddress") or conf.get("spark.driver.host") or local_host


def _serve(address: tuple[str, int], authkey: bytes, start: Callable[[], Any]):
    """The standing task's body (``mapPartitions`` over its one index): connect, build the worker, serve."""

    def run(indexes):
        index = next(iter(indexes))
        conn = Client(address, authkey=authkey)
        worker = None
        try:
            conn.send(index)
            worker = start()
            conn.send(("ready", None))
            while (message := conn.recv()) is not None:
                try:
                    answer = ("ok", worker(message))
                except Exception:  # noqa: BLE001 - the driver raises it, with this traceback, for the batch
                    answer = ("error", traceback.format_exc())
                conn.send(answer)
        finally:
            close = getattr(worker, "close", None)
            if close is not None:
                close()
            conn.close()
        yield index

    return run


class StandingTasks:
    """``count`` Spark tasks that stay up, each a worker the driver sends messages to (module docstring).

    ``start`` is pickled into every task and called there once: it returns the worker, a callable of
    one message returning the answer (and with ``close()`` if it holds resources).
    """

    def __init__(self, spark, count: int, start: Callable[[], Any], name: str, host: str,
                 answer_seconds: float = 120.0):
        # deferred: pyspark: the job thread must carry the caller's scheduler pool (an InheritableThread)
        from pyspark import InheritableThread

        self.count, self.name, self.answer_seconds = count, name, answer_seconds
        self._sc = spark.sparkContext
        self._group = f"{name}-standing-{secrets.token_hex(4)}"
        authkey = secrets.token_bytes(32)
        self._listener = Listener((host, 0), authkey=authkey)
        serve = _serve(self._listener.address, authkey, start)
        self._failure: BaseException | None = None
        self._connections: dict[int, Connection] = {}

        def job() -> None:
            try:
                self._sc.setJobGroup(self._group, f"{name}: {count} standing tasks", interruptOnCancel=True)
                self._sc.parallelize(range(count), count).mapPartitions(serve).collect()
            except BaseException as exc:  # noqa: BLE001 - raised by the batch that finds the tasks gone
                self._failure = exc

        self._job = InheritableThread(target=job, name=f"{name}-standing-tasks", daemon=True)
        self._job.start()
        try:
            self._connect()
        except BaseException:
            self.close()
            raise

    def _connect(self) -> None:
        """Accept every task's connection and wait until each worker is built."""
        deadline = time.monotonic() + CONNECT_SECONDS
        lock = threading.Lock()
        done = threading.Event()

        def accept() -> None:
            while not done.is_set() and len(self._connections) < self.count:
                try:
                    conn = self._listener.accept()
                    index = conn.recv()
                except (OSError, EOFError, multiprocessing.AuthenticationError):
                    continue  # closing: the wake-up below; or a stranger
                with lock:
                    if done.is_set():
                        conn.close()
                        return
                    if index in self._connections:  # a retried task: its first attempt is gone
                        self._connections[index].close()
                    self._connections[index] = conn

        accepting = threading.Thread(target=accept, name=f"{self.name}-standing-accept", daemon=True)
        accepting.start()
        while accepting.is_alive() and self._job.is_alive() and time.monotonic() < deadline:
            accepting.join(0.2)
        with lock:
            done.set()
            connected = len(self._connections)
        if accepting.is_alive():  # wake the accept() it waits in, so the thread ends with the listener
            with contextlib.suppress(OSError):
                socket.create_connection(self._listener.address, timeout=1).close()
            accepting.join(5)
        if connected < self.count:
            raise TransientError(
                f"{self.name}: {connected} of {self.count} standing Spark tasks connected within "
                f"{CONNECT_SECONDS:.0f}s ({self._failure or 'no task failed'}); the application needs a free task "
                "slot for each (pipeline.click_tasks; docs/performance.md)")
        self._collect(dict.fromkeys(self._connections, 0), deadline)

    def run(self, messages: dict[int, Any]) -> dict[int, Any]:
        """Send each task its message, then collect every task's answer (``answer_seconds`` for them all)."""
        try:
            for index, message in messages.items():
                self._connections[index].send(message)
        except OSError as exc:
            raise TransientError(f"{self.name}: a standing task is gone ({exc}; {self._failure})") from exc
        return self._collect(messages, time.monotonic() + self.answer_seconds)

    def _collect(self, messages: dict[int, Any], deadline: float) -> dict[int, Any]:
        """Each task's answer to its message, as they come, while the tasks' Spark job lives, until ``deadline``."""
        waiting = {self._connections[index]: index for index in messages}
        answers: dict[int, Any] = {}
        while waiting:
            for ready in wait(list(waiting), timeout=0.2):
                conn = cast(Connection, ready)
                index = waiting.pop(conn)
                try:
                    status, answer = conn.recv()
                except (EOFError, OSError) as exc:
                    raise TransientError(f"{self.name}: standing task {index} is gone ({exc}; {self._failure})") from exc
                if status == "error":
                    log.error("%s: standing task %d failed:\n%s", self.name, index, answer)
                    raise StandingTaskError(
                        f"{self.name}: standing task {index} failed: {answer.strip().splitlines()[-1]}")
                answers[index] = answer
            if waiting and not self._job.is_alive():
                raise TransientError(f"{self.name}: the standing tasks' Spark job ended ({self._failure})")
            if waiting and time.monotonic() > deadline:
                raise TransientError(f"{self.name}: standing tasks {sorted(waiting.values())} did not answer in time")
        return answers

    def close(self) -> None:
        """Tell every task to stop, then end their Spark job (cancelled if a task does not stop)."""
        connections = list(self._connections.values())
        for conn in connections:
            with contextlib.suppress(OSError):
                conn.send(None)
        self._job.join(10)
        if self._job.is_alive():
            self._sc.cancelJobGroup(self._group)
            self._job.join(30)
        for conn in connections:
            conn.close()
        self._listener.close()
