"""The soak's own process: its maintenance service, beside the soak's writer as in production.

The maintenance service is `lakehouse run maintain`: its own Spark application at its lower
CPU priority.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from deploy.local.processes import free_port
from lab.bench.process_cpu import tree_cpu_seconds
from lakehouse.errors import LakehouseError
from lakehouse.settings import Settings
from lakehouse.settings_env import settings_env
from pipeline.metrics import BATCHES, MAINTENANCE_SECONDS


@dataclass
class MaintenanceProbe:
    """What the soak reads from its maintenance service: action seconds (its /metrics) and CPU."""

    process: subprocess.Popen | None = None  # None: no maintenance (the baseline)
    url: str = ""
    log_path: Path | None = None

    def _families(self, name: str) -> list:
        """The service's metric families called ``name`` ([] for the baseline or while its JVM starts)."""
        if self.process is None:
            return []
        if self.process.poll() is not None:
            raise LakehouseError(f"the soak's maintenance service exited with code {self.process.returncode}: "
                               f"see {self.log_path}")
        try:
            with urllib.request.urlopen(self.url, timeout=10) as response:
                text = response.read().decode()
        except OSError:
            return []  # its JVM is still starting: nothing done yet
        return [f for f in text_string_to_metric_families(text) if f.name == name]

    def seconds_so_far(self) -> dict[str, tuple[float, float]]:
        """(sum, count) of seconds per action so far ({} for the baseline or while its JVM starts)."""
        return histogram_sums(self._families(MAINTENANCE_SECONDS.describe()[0].name))

    def wait_for_first_pass(self, timeout_s: float = 600.0) -> float:
        """Block until the service has finished one pass over the tables; returns the seconds waited.

        The soak measures maintenance keeping up with a steady load, not a cold start: a
        Spark JVM starting at nice 19 beside a busy writer on 2 cores (CI) took over two
        minutes to its first compaction, while the click table's small files passed the goal.
        """

        if self.process is None:
            return 0.0
        began = time.monotonic()
        name = BATCHES.describe()[0].name
        while True:
            passes = sum(sample.value for family in self._families(name) for sample in family.samples
                         if sample.name.endswith("_total") and sample.labels.get("pipeline") == "maintain")
            if passes >= 1:
                return time.monotonic() - began
            if time.monotonic() - began > timeout_s:
                raise LakehouseError(f"the soak's maintenance service finished no pass in {timeout_s:.0f} s: "
                                   f"see {self.log_path}")
            time.sleep(1.0)

    def cpu_so_far(self) -> float:
        """CPU seconds of the service's processes (its Python and its Spark JVM) so far."""
        return tree_cpu_seconds(self.process.pid) if self.process is not None else 0.0


@contextmanager
def maintenance_service(settings: Settings, log_path: Path) -> Iterator[MaintenanceProbe]:
    """`lakehouse run maintain` on the soak's tables, in a process of its own.

    Its own Spark application, as in Kubernetes, so it runs at its lower CPU priority
    (``maintenance.nice``) and the writer's batches get the cores first.
    """

    s = settings.model_copy(deep=True)
    s.metrics.maintenance_port = free_port(s.metrics.host)
    with log_path.open("ab") as log:
        process = subprocess.Popen([sys.executable, "-m", "cli", "run", "maintain"], env=child_env(s), stdout=log,
                                   stderr=subprocess.STDOUT, start_new_session=True)
    try:
        yield MaintenanceProbe(process, f"http://{s.metrics.host}:{s.metrics.maintenance_port}/metrics", log_path)
    finally:
        process.terminate()  # stops after the current pass
        try:
            process.wait(180)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def histogram_sums(families) -> dict[str, tuple[float, float]]:
    """(sum, count) so far of a one-label histogram, by label value: diff two to get a window."""
    totals: dict[str, list[float]] = {}
    for family in families:
        for sample in family.samples:
            label = next(iter(sample.labels.values()), "")
            if sample.name.endswith("_sum"):
                totals.setdefault(label, [0.0, 0.0])[0] = sample.value
            elif sample.name.endswith("_count"):
                totals.setdefault(label, [0.0, 0.0])[1] = sample.value
    return {k: (v[0], v[1]) for k, v in totals.items()}


def child_env(s: Settings) -> dict[str, str]:
    """The environment for a child of the soak (producer, maintenance): it resolves exactly ``s``."""
    return {k: v for k, v in os.environ.items() if not k.startswith("LAKEHOUSE_")} | settings_env(s, with_secrets=True)
