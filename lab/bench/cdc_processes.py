"""The capture and the apply job of a CDC benchmark, each a process of its own, as a supervisor runs them.

A chaos run kills either with SIGKILL and starts it again; the benchmark polls what the apply
reports committed on its own /metrics (``applied``), which costs the system under test nothing.
The Flink peer reports nothing there: how far it applied is its consumer group's offsets
(``lab.peers.cdc_flink``).
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

from lab.bench.cdc import free_port, start_job_process
from lab.peers import cdc_flink
from lakehouse.catalog import pyiceberg_catalog
from lakehouse.errors import LakehouseError
from lakehouse.settings import Settings
from pipeline.cdc.dimension_tables import committed_position

#: the CDC peers a benchmark runs in the apply's place, by name: each a `python -m` module
PEER_MODULES = {"merge-peer": "lab.peers.cdc_merge", "python-peer": "lab.peers.cdc_python"}
#: seed 004's Flink upsert sink (``lab.peers.cdc_flink``), a process of the Flink peer's environment
FLINK_PEER = "flink-peer"


class CdcProcesses:
    """The capture and the apply job as processes of their own, which a chaos run kills with SIGKILL and restarts."""

    def __init__(self, s: Settings, tag: str, apply: str = "pipeline", flink_checkpoint_s: float = 1.0):
        """``apply``: "pipeline" runs `lakehouse run dims`; a peer's name runs that peer (``PEER_MODULES``,
        ``FLINK_PEER`` with a checkpoint every ``flink_checkpoint_s``)."""
        self.s, self.logs, self.apply = s, s.run_dir / "logs", apply
        self.logs.mkdir(parents=True, exist_ok=True)
        self.tag = tag
        self.flink_checkpoint_s = flink_checkpoint_s
        self.flink_job = cdc_flink.prepare(s, flink_checkpoint_s, parallelism=2) if apply == FLINK_PEER else None
        self.flink_progress = cdc_flink.GroupProgress(s) if apply == FLINK_PEER else None
        self.ports: dict[str, int] = {}
        self.running = {name: self._start(name) for name in ("cdc", "dims")}
        self.kills: list[str] = []

    def _start(self, name: str) -> subprocess.Popen:
        self.ports[name] = free_port(self.s.metrics.host)
        log = self.logs / f"bench-cdc-scale-{name}-{self.tag}.log"
        if name == "dims" and self.flink_job is not None:
            return cdc_flink.start(self.s, self.flink_job, log)
        if name == "dims" and self.apply in PEER_MODULES:
            return start_job_process(self.s, name, log, self.ports[name], module=PEER_MODULES[self.apply])
        return start_job_process(self.s, name, log, self.ports[name])

    def applied(self) -> int | None:
        """The member topic's offset the apply job reports committed (its /metrics), or None before it reports.

        What the benchmark polls while it waits: loading the table every half second cost the
        metastore ~35 ms of CPU a call (a connection, and Hive's object store, each time) and took
        ~7 % of a core from the run it measured (10 M-row snapshot). The table confirms the end.
        """
        topic = self.s.cdc_topic("user_member")
        if self.flink_job is not None:
            return self.committed()
        url = f"http://{self.s.metrics.host}:{self.ports['dims']}/metrics"
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                text = response.read().decode()
        except OSError:
            return None  # starting, or just restarted
        offsets = [sample.value for family in text_string_to_metric_families(text)
                   if family.name == "lakehouse_kafka_committed_offset"
                   for sample in family.samples if sample.labels.get("topic") == topic]
        return int(sum(offsets)) if offsets else None

    def committed(self) -> int:
        """Changes the member table holds: the offsets its newest progress snapshot records (the Flink peer's:
        its consumer group's, committed with the sink's commit of the same checkpoint)."""
        topic = self.s.cdc_topic("user_member")
        if self.flink_progress is not None:
            return self.flink_progress.applied(topic)
        table = pyiceberg_catalog(self.s).load_table(self.s.catalog.members_table)
        return sum(committed_position(table).offsets.get(topic, {}).values())

    def settle(self) -> None:
        """Wait until what ``committed`` reports is in the table: the Flink peer's source commits its offsets and its
        sink its files as one checkpoint completes, in two tasks, so the table may trail the offsets by moments."""
        if self.flink_job is not None:
            time.sleep(self.flink_checkpoint_s + 2.0)

    def pids(self) -> dict[str, int]:
        return {"capture": self.running["cdc"].pid, "apply": self.running["dims"].pid}

    def check(self) -> None:
        for name, p in self.running.items():
            if p.poll() is not None:
                raise LakehouseError(f"`lakehouse run {name}` ended (exit {p.returncode}); its log: "
                                   f"{self.logs / f'bench-cdc-scale-{name}-{self.tag}.log'}")

    def crash(self, name: str, when: str) -> None:
        """kill -9 one of them, then start it again (as a supervisor would).

        The whole process group at once (each was started in a session of its own): a JVM the
        process started (Spark's, Flink's) dies with it, as in a container killed, instead of
        noticing its parent gone and shutting down in order."""
        os.killpg(self.running[name].pid, signal.SIGKILL)
        self.running[name].wait()
        self.running[name] = self._start(name)
        self.kills.append(f"{name} {when}")

    def stop(self) -> None:
        if self.flink_progress is not None:
            self.flink_progress.close()
        for p in self.running.values():
            p.send_signal(signal.SIGTERM)
        for p in self.running.values():
            try:
                p.wait(60)
            except subprocess.TimeoutExpired:
                p.kill()
