"""Fixtures of the CDC tests: an isolated source database, topics and tables, and the binlog capture running."""

from __future__ import annotations

import threading
import time

import pytest

from pipeline.capture.checkpoints import read_checkpoint
from pipeline.capture.connector import Capture
from tests.support.cdc import isolated_cdc_settings


@pytest.fixture
def cdc(settings):
    return isolated_cdc_settings(settings)


@pytest.fixture
def capture(cdc):
    stop = threading.Event()
    errors: list[BaseException] = []
    cap = Capture(cdc)

    def run():
        try:
            cap.run(stop)
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while read_checkpoint(cdc) is None:  # the snapshot is done once a position is durable
        assert time.monotonic() < deadline and not errors, errors
        time.sleep(0.2)
    yield errors
    stop.set()
    thread.join(30)
