"""A job's micro-batch loop in a background thread, for the duration of a ``with`` block."""

from __future__ import annotations

import threading

from pipeline.runner import run_loop


class Looping:
    """``with Looping(job, trigger) as job:`` runs ``run_loop`` until the block ends, then closes the job."""

    def __init__(self, job, trigger_seconds: float, close: bool = True):
        self.job, self.close = job, close
        self.stop = threading.Event()
        self.thread = threading.Thread(target=run_loop, args=(job, trigger_seconds, self.stop), daemon=True)

    def __enter__(self):
        self.thread.start()
        return self.job

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self.thread.join(120)
        if self.close and hasattr(self.job, "close"):
            self.job.close()
