"""Batch-failure logs name the real cause in one line (``pipeline.runner._describe``)."""

import pytest

from pipeline.runner import _describe


class PythonException(Exception):
    """Shaped like PySpark's: the text opens with a blank line and a banner, the cause comes last."""


def test_worker_error_is_named_by_the_traceback_last_line():
    exc = PythonException("\n  An exception was thrown from the Python worker. Please see the stack trace below.\n"
                          "Traceback (most recent call last):\n  File \"range_reader.py\", line 82, in batches\n"
                          "TimeoutError: no records from clickevents[0] in 60s\n")
    assert _describe(exc) == "PythonException: TimeoutError: no records from clickevents[0] in 60s"


def test_plain_error_keeps_its_first_line():
    assert _describe(ValueError("bad offset\nmore detail")) == "ValueError: bad offset"


def test_blank_message_still_names_the_type():
    assert _describe(RuntimeError("")) == "RuntimeError: "


class _Job:
    """A job whose every batch raises ``error``; it stops the loop after ``limit`` batches."""

    name, tables = "test", []

    def __init__(self, settings, error: Exception, stop, limit: int = 3):
        self.settings, self.error, self.stop, self.limit = settings, error, stop, limit
        self.batches, self.recovered = 0, 0

    def run_once(self) -> int:
        self.batches += 1
        if self.batches >= self.limit:
            self.stop.set()
        raise self.error

    def recover(self) -> None:
        self.recovered += 1


def test_a_fatal_error_stops_the_loop_at_once_and_a_transient_one_is_retried(tmp_path):
    """An envelope the apply job cannot read would be read again on every retry: it stops the job
    (it used to be retried for ever, though its docstring said the job stops)."""
    import threading

    from lakehouse.settings import load_settings
    from pipeline.cdc.changes import EnvelopeError
    from pipeline.runner import _loop

    settings = load_settings()
    settings.run_dir = tmp_path  # the loop only looks at its disk's free space

    stop = threading.Event()
    job = _Job(settings, EnvelopeError("cdc.shop.products[0]@7: unknown op 'x'"), stop)
    with pytest.raises(EnvelopeError, match="unknown op"):
        _loop(job, 0.01, stop, max_batches=None, max_backoff=0.01)
    assert (job.batches, job.recovered) == (1, 0)

    stop = threading.Event()
    flaky = _Job(settings, ConnectionError("object store away"), stop)
    _loop(flaky, 0.01, stop, max_batches=None, max_backoff=0.01)  # retried until the job stops the loop
    assert (flaky.batches, flaky.recovered) == (3, 2), "each batch after a failure follows a recovery"


def test_no_batch_runs_until_a_failed_recovery_succeeds(tmp_path):
    """A batch planned from offsets the job held before a failure could write that batch twice (its commit may
    have landed): while ``recover`` fails (the metastore away too), the loop retries it and runs no batch."""
    import threading

    from lakehouse.settings import load_settings
    from pipeline.runner import _loop

    settings = load_settings()
    settings.run_dir = tmp_path
    stop = threading.Event()
    calls: list[str] = []

    class StaysDown(_Job):
        def run_once(self) -> int:
            calls.append("batch")
            if len(calls) > 6:
                self.stop.set()
                return 1
            if calls.count("batch") == 1:
                raise ConnectionError("object store away")
            return 1

        def recover(self) -> None:
            calls.append("recover")
            if calls.count("recover") <= 2:
                raise ConnectionError("metastore away too")

    _loop(StaysDown(settings, ConnectionError(), stop), 0.0, stop, max_batches=None, max_backoff=0.0)
    assert calls[:5] == ["batch", "recover", "recover", "recover", "batch"], calls


def test_ready_only_while_batches_succeed(tmp_path):
    """/ready, what a Kubernetes readiness probe asks: 503 until a batch ran, 503 while batches fail."""
    import threading
    import urllib.error
    import urllib.request

    from deploy.local.processes import free_port
    from lakehouse.settings import Settings
    from pipeline import metrics
    from pipeline.runner import run_loop

    port = free_port()
    metrics.serve("127.0.0.1", port)

    def status() -> tuple[int, str]:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/ready", timeout=5) as resp:
                return resp.status, resp.read().decode()
        except urllib.error.HTTPError as err:
            return err.code, err.read().decode()

    metrics._ready.clear()
    assert status()[0] == 503
    settings = Settings(run_dir=tmp_path)

    class Works:
        name, tables = "works", []

        def __init__(self):
            self.settings = settings

        def run_once(self) -> int:
            return 1

        def recover(self) -> None:
            pass

    run_loop(Works(), 0.0, threading.Event(), max_batches=1)
    assert status() == (200, "ready\n")
    stop = threading.Event()
    run_loop(_Job(settings, RuntimeError("broker away"), stop, limit=1), 0.0, stop, max_backoff=0.0)
    assert status() == (503, "failing: test\n")
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
        assert b"lakehouse_pipeline_batches_total" in resp.read()


def test_a_job_woken_by_a_commit_starts_its_batch_before_its_trigger(tmp_path):
    """The live aggregates read the click table: in one process, a click commit starts their batch at once."""
    import threading
    import time

    from lakehouse.settings import load_settings
    from pipeline import table_commits
    from pipeline.runner import _loop

    settings = load_settings()
    settings.run_dir = tmp_path

    class Reader:
        name, tables = "reader", []

        def __init__(self):
            self.settings, self.started = settings, []
            self.wake = table_commits.committed("test.woken_table")

        def run_once(self) -> int:
            self.started.append(time.monotonic())
            return 1

        def recover(self) -> None:
            pass

    stop, reader = threading.Event(), Reader()
    loop = threading.Thread(target=_loop, args=(reader, 60.0, stop, None, 1.0))
    loop.start()
    try:
        deadline = time.monotonic() + 10
        while not reader.started and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.3)
        assert len(reader.started) == 1, "nothing committed: the next batch waits for its 60 s trigger"
        announced = time.monotonic()
        table_commits.announce("test.woken_table")
        while len(reader.started) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert len(reader.started) == 2 and reader.started[1] - announced < 1.0, "the commit started the batch"
    finally:
        stop.set()
        loop.join(5)
    assert not loop.is_alive(), "a stop ends the wait within its slice"
