"""A CDC peer as a process of its own, run the way `lakehouse run dims` runs the apply: settings from LAKEHOUSE_*
variables, /metrics on the pipeline's port, stopped by SIGTERM between batches."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from lakehouse.settings import Settings, load_settings
from pipeline.kafka_source.batch_job import KafkaBatchJob
from pipeline.metrics import serve
from pipeline.runner import install_stop_handlers, run_loop


def run_peer(make_job: Callable[[Settings], KafkaBatchJob]) -> None:
    """Build the peer's job from the settings and run its batches until SIGTERM."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    settings = load_settings()
    serve(settings.metrics.host, settings.metrics.pipeline_port)
    stop = threading.Event()
    install_stop_handlers(stop)
    job = make_job(settings)
    try:
        run_loop(job, settings.pipeline.dims_trigger_seconds, stop)
    finally:
        job.close()
