"""What both Flink peer jobs do around their SQL: a streaming table environment from the job's settings,
and a submitted job kept running until SIGTERM.

Runs in the Flink peer's own environment (``flink_setup``): PyFlink and the standard library only.
"""

from __future__ import annotations

import signal
import threading


def table_environment(job: dict):
    """A streaming TableEnvironment with the job file's Flink settings (``flink_setup.common_spec``)."""
    # deferred: pyflink exists only in the Flink peer's environment (module docstring)
    from pyflink.table import EnvironmentSettings, TableEnvironment

    env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
    config = env.get_config()
    for key, value in job["flink"].items():
        config.set(key, value)
    return env


def run_until_stopped(client) -> None:
    """Watch the submitted job (its ``JobClient``) until SIGTERM, then cancel it; exit if it stops by itself."""
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    while not stop.wait(1.0):
        status = str(client.get_job_status().result())
        if status in ("FAILED", "CANCELED", "FINISHED"):
            raise SystemExit(f"the Flink job stopped: {status}")
    client.cancel().result()
