"""Everything the lakehouse runs, started the way a runtime starts it: for `make demo` and `bench system`.

- the binlog capture as its own process (`lakehouse run cdc`), as in every runtime: in a
  thread of this process it would share one interpreter lock with the Spark driver;
- the dimension apply as a Spark application of its own (`lakehouse run dims`): its driver commits
  through PyIceberg, Python work that beside the click job's driver threads held the same
  interpreter lock, and every table's freshness suffered inside the click application
  (docs/benchmarks.md);
- one Spark application with the click ingestion and the live aggregates, each in its FAIR pool
  (`lakehouse run pipeline --jobs clicks,aggregate`, as the cluster's SparkApplication runs them).
"""

from __future__ import annotations

import logging
import signal
import subprocess
import threading
import time
from pathlib import Path

from rich.console import Console

from lab.bench.cdc import start_capture, start_job_process
from lab.bench.ingest import committed_total
from lakehouse import kafka_clients
from lakehouse.catalog import pyiceberg_catalog
from lakehouse.errors import LakehouseError
from lakehouse.settings import Settings
from pipeline.aggregates.live import LiveAggregates
from pipeline.app import run_job
from pipeline.capture.checkpoints import read_checkpoint
from pipeline.cdc.dimension_tables import committed_position
from pipeline.clicks.job import ClickIngestJob
from pipeline.spark_session import build_session

#: what the whole system needs of the local stack
SYSTEM_STACK = ("kafka", "s3", "metastore", "mariadb")


class RunningSystem:
    """Capture and dims processes + the click ingestion and live aggregates in a Spark application; ``close()``
    stops all."""

    def __init__(self, settings: Settings, console: Console, app_name: str, capture_log: Path):
        """``capture_log``: the capture's log; the others' go beside it (``dims`` for ``capture``...)."""
        self.settings, self.stop = settings, threading.Event()
        self.threads: list[threading.Thread] = []
        self.errors: list[BaseException] = []
        self.spark, self.dims, self.aggregates = None, None, None
        self._log_handler: logging.FileHandler | None = None
        capture_log.parent.mkdir(parents=True, exist_ok=True)
        self.capture = start_capture(settings, capture_log)
        try:
            with console.status("starting the binlog capture (first run: consistent snapshot)..."):
                deadline = time.monotonic() + 120
                while read_checkpoint(settings) is None:
                    if self.capture.poll() is not None or time.monotonic() > deadline:
                        raise LakehouseError(f"the binlog capture did not start; its log: {capture_log}")
                    time.sleep(0.2)
            console.log(f"capture running: {settings.mariadb.database} -> {settings.kafka.cdc_topic_prefix}.* "
                        f"(log {capture_log})")
            dims_log = capture_log.with_name(capture_log.name.replace("capture", "dims"))
            self.dims = start_job_process(settings, "dims", dims_log)
            with console.status("applying the capture's snapshot to the dimension tables..."):
                self._wait_for_snapshot(settings, dims_log)  # before clicks are enriched
            console.log(f"dimension apply running (log {dims_log})")
            jobs_log = capture_log.with_name(capture_log.name.replace("capture", "pipeline"))
            self._log_to(jobs_log)
            with console.status("starting Spark: click ingestion and live aggregates..."):
                self.spark = build_session(settings, app_name)
                self.clicks = ClickIngestJob(self.spark, settings)
                self.aggregates = LiveAggregates(self.spark, settings)
            console.log(f"click ingestion and live aggregates running in this process (log {jobs_log})")
        except BaseException:
            self._stop_processes()
            raise
        self.threads = [self._in_pool("clicks", self.clicks), self._in_pool("aggregate", self.aggregates)]

    def _log_to(self, path: Path) -> None:
        """The in-process jobs' log lines (each batch's rows and seconds) into ``path``, as the processes' go into
        theirs: the terminal keeps the run's own progress."""
        handler = logging.FileHandler(path)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        logger = logging.getLogger("pipeline")
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
        logger.propagate = False
        self._log_handler = handler

    def _wait_for_snapshot(self, settings: Settings, dims_log: Path, timeout_s: float = 300) -> None:
        """Until each dimension table holds its topic's records as they stood when the capture's snapshot ended."""
        catalog = pyiceberg_catalog(settings)
        ends = {topic: kafka_clients.end_offsets(settings.kafka.bootstrap, topic)
                for topic in (settings.cdc_topic(t) for t in settings.cdc_tables)}
        tables = {settings.cdc_topic(c.source): c.table for c in settings.captured_tables}
        deadline = time.monotonic() + timeout_s
        while True:
            behind = [topic for topic, end in ends.items() if any(
                committed_position(catalog.load_table(tables[topic])).offsets.get(topic, {}).get(p, 0) < o
                for p, o in end.items() if o)] if all(catalog.table_exists(t) for t in tables.values()) else list(ends)
            if not behind:
                return
            if self.dims.poll() is not None or time.monotonic() > deadline:
                raise LakehouseError(f"the dimension apply did not apply the snapshot of {', '.join(behind)}; "
                                     f"its log: {dims_log}")
            time.sleep(0.5)

    def _in_pool(self, pool: str, job) -> threading.Thread:
        def run():
            self.spark.sparkContext.setLocalProperty("spark.scheduler.pool", pool)
            try:
                run_job(job, self.settings, self.stop)
            except BaseException as exc:  # noqa: BLE001 - reported by ``failed()``, the run goes on to its summary
                self.errors.append(exc)

        thread = threading.Thread(target=run, name=f"system-{pool}", daemon=True)
        thread.start()
        return thread

    def committed(self) -> int:
        """Click records (valid and dead-lettered) committed so far."""
        return committed_total(self.clicks, self.settings.kafka.clicks_topic)

    def produced(self) -> int:
        """Records in the click topic so far (what the load generator delivered)."""
        return kafka_clients.records_in_topic(self.settings.kafka.bootstrap, self.settings.kafka.clicks_topic)

    def failed(self) -> str | None:
        """The first job error, or the capture's exit, if anything stopped."""
        if self.errors:
            return f"{type(self.errors[0]).__name__}: {self.errors[0]}"
        if self.capture.poll() is not None:
            return f"the binlog capture exited with code {self.capture.returncode}"
        if self.dims.poll() is not None:
            return f"the dimension apply exited with code {self.dims.returncode}"
        return None

    def close(self) -> None:
        """Stop the jobs between batches, then the capture (the Spark session stays for the summary)."""
        self.stop.set()
        for thread in self.threads:
            thread.join(60)
        self.clicks.close()
        self._stop_processes()
        if self._log_handler is not None:
            logging.getLogger("pipeline").removeHandler(self._log_handler)
            self._log_handler.close()

    def _stop_processes(self) -> None:
        for process in (self.dims, self.capture):
            if process is not None and process.poll() is None:
                process.send_signal(signal.SIGTERM)  # both stop between batches
                try:
                    process.wait(30)
                except subprocess.TimeoutExpired:
                    process.kill()
