"""One way to build a SparkSession wired to the shared Iceberg catalog.

Every job (and every test) gets its session here, so the catalog, the jars and the
memory settings are the same everywhere. Jars are the pinned ones in ``.tools/jars``
(Iceberg runtime, AWS SDK v2); Spark itself comes from the pyspark wheel.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

from deploy.artifacts import jar_paths
from lakehouse.catalog import java_catalog_properties
from lakehouse.settings import Settings
from pipeline.jobs import JOBS

#: log4j2 configuration of local Spark JVMs
LOG_CONFIG = Path(__file__).with_name("spark-log4j2.properties")


def spark_log(settings: Settings) -> Path:
    """Where local Spark JVMs write their log (one file per process user, appended)."""
    path = settings.run_dir / "logs" / "spark.log"
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def spark_conf(settings: Settings, app_name: str, extra_jars: tuple[Path, ...] = ()) -> dict[str, str]:
    """The catalog and SQL settings every job needs; in local mode also jars (``extra_jars`` after the
    project's: the tests' own Java helpers), driver and interpreters."""
    prefix = f"spark.sql.catalog.{settings.catalog.name}"
    conf = {
        "spark.sql.extensions": "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions",
        prefix: "org.apache.iceberg.spark.SparkCatalog",
        "spark.sql.defaultCatalog": settings.catalog.name,
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.shuffle.partitions": str(settings.pipeline.spark_shuffle_partitions),
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.scheduler.mode": "FAIR",
        "spark.scheduler.allocation.file": str(scheduler_pools(settings)),
        "spark.sql.adaptive.enabled": "true",
        # The first job waits for every executor (up to Spark's 30 s): the CDC apply spreads its key state over
        # the executors there are when it builds it (pipeline.cdc.apply).
        "spark.scheduler.minRegisteredResourcesRatio": "1.0",
        # A CDC apply task waits this long for the executor that holds its key state (pipeline.cdc.held_state)
        # before Spark would run it elsewhere, where the state is not: 3 s by default, shorter than a maintenance
        # rewrite may keep an executor busy. Only the apply's tasks have a preferred executor.
        "spark.locality.wait": "30s",
        # Python workers without the per-task re-read of Spark's archives (0.19 s a task; see the module).
        "spark.python.daemon.module": "pipeline.python_daemon",
        # Live commit locks heartbeat often enough that pipeline.commit_locks never frees them.
        "spark.hadoop.iceberg.hive.lock-heartbeat-interval-ms": str(int(settings.metastore.stale_lock_seconds * 1000 / 3)),
    }
    conf.update({f"{prefix}.{k}": v for k, v in java_catalog_properties(settings).items()})
    if settings.pipeline.spark_deploy == "local":
        # Under spark-submit these are the submitter's (the SparkApplication's) to set.
        conf.update({
            "spark.app.name": app_name,
            "spark.jars": ",".join(str(p) for p in (*jar_paths(settings.tools_dir), *extra_jars)),
            "spark.driver.memory": settings.pipeline.spark_driver_memory,
            "spark.driver.bindAddress": settings.metrics.host,
            "spark.driver.host": settings.metrics.host,
            # The JVM's log goes to a file (spark-log4j2.properties): terminals show the project's own output.
            "spark.driver.extraJavaOptions": (f"{settings.pipeline.spark_java_options} -Djava.net.preferIPv4Stack=true"
                                              f" -Dlog4j2.configurationFile={LOG_CONFIG}"
                                              f" -Dlakehouse.spark.log={spark_log(settings)}").strip(),
            # Python workers must use this interpreter (the venv with pyarrow and the project).
            "spark.pyspark.python": os.environ.get("PYSPARK_PYTHON", sys.executable),
            "spark.pyspark.driver.python": sys.executable,
            # Shuffle and block files under the run directory, not /tmp: a killed application's stay
            # where `lakehouse stack down --purge` (and the test suite's cleanup) removes them.
            "spark.local.dir": str(settings.run_dir / "spark-local"),
        })
    return conf


def scheduler_pools(settings: Settings) -> Path:
    """The FAIR-scheduler pools file: writers outweigh maintenance, each writer is owed one core.

    Written at session start from the settings (nothing to keep in sync by hand). Without it
    every pool weighs the same and a compaction's tasks take half the cores from a batch.
    """
    weight = settings.pipeline.writer_pool_weight  # each job runs in the pool named after it
    shares = {name: spec.pool_weight(settings) for name, spec in JOBS.items()}
    pools = "".join(f'  <pool name="{name}"><schedulingMode>FIFO</schedulingMode><weight>{w}</weight>'
                    f'<minShare>{share}</minShare></pool>\n' for name, (w, share) in shares.items())
    path = Path(tempfile.gettempdir()) / f"lakehouse-fairscheduler-{os.getuid()}-w{weight}.xml"
    path.write_text(f"<?xml version=\"1.0\"?>\n<allocations>\n{pools}</allocations>\n")
    return path


def local_cluster_home(settings: Settings) -> Path:
    """A SPARK_HOME for Spark's local-cluster mode (executors as processes of their own on this machine): links to
    the pyspark package's own files. Its in-driver worker writes the executors' work directories under
    SPARK_HOME/work, which must not be the installed package."""
    # deferred: pyspark: loaded by the commands that start Spark
    import pyspark

    home = settings.run_dir / "spark-home"
    home.mkdir(parents=True, exist_ok=True)
    for entry in Path(pyspark.__file__).parent.iterdir():
        link = home / entry.name
        if not link.is_symlink():
            link.symlink_to(entry)
    return home


def build_session(settings: Settings, app_name: str, master: str | None = None, extra_jars: tuple[Path, ...] = (),
                  conf: dict[str, str] | None = None):
    """A SparkSession: local mode with ``pipeline.spark_cores`` cores and the click job's standing tasks' slots
    besides (or ``master`` / SPARK_MASTER: ``local-cluster[2,1,1024]`` runs two executor processes), or the
    submitter's in cluster mode; ``conf`` on top of the project's (a benchmark's event log)."""
    # deferred: pyspark: loaded by the commands that start Spark, not by every importer of spark_conf
    from pyspark.sql import SparkSession

    if settings.pipeline.spark_deploy == "cluster":
        builder = SparkSession.builder  # spark-submit already chose master, driver and executors
    else:
        # PySpark picks the worker interpreter from the environment, not from the conf.
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        # Keep Spark's own sockets on loopback (it would otherwise pick the host's address).
        os.environ.setdefault("SPARK_LOCAL_IP", settings.metrics.host)
        cores = settings.pipeline.spark_cores
        # the click job's standing tasks hold a slot each while they wait: the other jobs get the cores' slots
        master = master or os.environ.get("SPARK_MASTER", f"local[{cores + settings.pipeline.click_tasks}]")
        builder = SparkSession.builder.master(master)
        if master.startswith("local["):
            builder = builder.config("spark.default.parallelism", str(cores))
        if master.startswith("local-cluster"):
            if "SPARK_HOME" not in os.environ:
                os.environ["SPARK_HOME"] = str(local_cluster_home(settings))
            builder = builder.config("spark.executor.memory", settings.pipeline.spark_executor_memory)
            if settings.pipeline.spark_java_options:
                builder = builder.config("spark.executor.extraJavaOptions", settings.pipeline.spark_java_options)
    for key, value in {**spark_conf(settings, app_name, extra_jars), **(conf or {})}.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    _quiet_loggers(spark)
    return spark


def _quiet_loggers(spark) -> None:
    """Silence known-harmless noise: S3FileIO finalizer warnings when the catalog cache is off, and
    Iceberg's stack trace per commit retry after another process (the maintenance service) committed
    first - the retry is the design; a commit that fails for good still raises."""
    jvm = spark.sparkContext._jvm
    level = jvm.org.apache.logging.log4j.Level.ERROR
    for name in ("org.apache.iceberg.aws.s3.S3FileIO", "org.apache.iceberg.io.ResolvingFileIO",
                 "org.apache.spark.sql.execution.streaming.ResolveWriteToStream",
                 "org.apache.spark.sql.execution.streaming.ProcessingTimeExecutor",
                 "org.apache.spark.sql.execution.CacheManager", "org.apache.hadoop.hive.metastore.HiveMetaStoreClient",
                 "org.apache.iceberg.util.Tasks"):
        jvm.org.apache.logging.log4j.core.config.Configurator.setLevel(name, level)
