"""A peer as a process of its own, run the way `lakehouse run <job>` runs a job: settings from LAKEHOUSE_* variables,
/metrics on the pipeline's port, stopped by SIGTERM between batches."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from lakehouse.settings import Settings, load_settings
from pipeline.kafka_source.batch_job import KafkaBatchJob
from pipeline.metrics import serve
from pipeline.runner import install_stop_handlers, run_loop


def run_peer(make_job: Callable[[Settings], KafkaBatchJob],
             trigger: Callable[[Settings], float] = lambda s: s.pipeline.dims_trigger_seconds) -> None:
    """Build the peer's job from the settings and run its batches, ``trigger`` seconds apart, until SIGTERM."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    settings = load_settings()
    serve(settings.metrics.host, settings.metrics.pipeline_port)
    stop = threading.Event()
    install_stop_handlers(stop)
    job = make_job(settings)
    try:
        run_loop(job, trigger(settings), stop)
    finally:
        job.close()
