"""PySpark's Python worker daemon, minus a per-task cost of Python 3.10 and 3.11.

Every task a Python worker runs (``mapInArrow``, UDFs) starts with
``importlib.invalidate_caches()``. From Python 3.10 to 3.11 that makes each zip importer on
``sys.path`` re-read its archive's directory at once, and Spark puts three archives there:
``pyspark.zip``, py4j's zip and the spark-core jar, thousands of entries. That is paid per
task, in every micro-batch of every job (what it costs: docs/performance.md). Python 3.12
made the re-read lazy (CPython issue 103200); pyspark 4.1 still calls it for every task
(``pyspark.worker_util.setup_spark_files``), and the project runs Python 3.11.

The archives Spark puts on the worker's path never change while a worker lives, so the
daemon turns the re-read into a no-op before forking workers. Spark runs this module in
place of ``pyspark.daemon`` through ``spark.python.daemon.module`` (``pipeline.spark_session``);
a zip added by a task (``--py-files``) still gets an importer of its own when first used.

The daemon also imports the modules the pipeline's tasks unpickle (``pipeline.clicks.task``,
``pipeline.cdc.apply`` and what they import: pyarrow, pyspark.sql, PyIceberg, DuckDB, the
settings) before it forks, so a worker starts warm: otherwise each new worker pays the imports,
in the first batch after a start and in the batch after a task failed (a failed task's
worker exits, as after the failed job that starts a schema evolution:
docs/schema-evolution.md).
"""

from __future__ import annotations

import zipimport


def _keep_directory(_importer: zipimport.zipimporter) -> None:
    """The archive's directory as read when first imported from: archives here are immutable."""


def install() -> None:
    zipimport.zipimporter.invalidate_caches = _keep_directory  # type: ignore[method-assign,assignment]


if __name__ == "__main__":
    install()
    from pyspark import daemon

    import pipeline.cdc.apply  # noqa: F401 - the CDC apply's tasks too (DuckDB, msgspec, the bucket work)
    import pipeline.clicks.job  # noqa: F401 - loaded once here, inherited by every forked worker
    import pipeline.clicks.task  # noqa: F401 - the click job's standing tasks (PyIceberg's writer, the consumer)

    daemon.manager()
