"""What the Flink peer needs around its job: its own Python environment, its jars, its settings.

PyFlink pins numpy, pandas and pyarrow far below the project's, so the job runs in a virtual
environment of its own, ``<tools>/flink-venv``, installed from ``flink-requirements.lock``
(hashes checked) the first time `lakehouse bench peers` runs Flink; its connector jars are the
``flink`` profile of ``deploy/jvm/pom.xml``, resolved and checked the same way, also on first use.
Neither is part of `make install`: only this benchmark needs them (~700 MB and ~200 MB).

The job (``flink_job.py``) gets every setting as explicit values in one JSON file, written here
from the project's settings, so it runs exactly the stack the benchmark measures.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from deploy.maven import install_profile, profile_dir
from lakehouse.catalog import s3_properties
from lakehouse.contract import click_contract
from lakehouse.errors import LakehouseError
from lakehouse.settings import Settings, secret

PROFILE = "flink"
LOCK = Path(__file__).with_name("flink-requirements.lock")
#: the Python PyFlink 1.19 supports (3.8-3.11); the project's own is 3.11 too
PYTHON_VERSION = "3.11"
#: jars the JVM must load from its own class path (Iceberg's Hive catalog makes Hadoop's
#: Configuration and the metastore client reflectively, which fails from Flink's user-code class loader)
PARENT_CLASSPATH = ("hadoop-client-api", "hadoop-client-runtime", "flink-sql-connector-hive", "commons-logging",
                    "javax.servlet-api")


class FlinkSetupError(LakehouseError):
    """The Flink peer's environment or jars could not be installed."""


def venv_dir(tools_dir: Path) -> Path:
    return tools_dir / "flink-venv"


def python(tools_dir: Path) -> Path:
    return venv_dir(tools_dir) / "bin" / "python"


def _stamp(tools_dir: Path) -> Path:
    return venv_dir(tools_dir) / ".installed-lock"


def install(tools_dir: Path, progress=print) -> None:
    """The environment and the jars, each only if missing or out of date (idempotent)."""
    if install_profile(PROFILE, tools_dir):
        progress(f"installed the Flink peer's jars into {profile_dir(tools_dir, PROFILE)}")
    if _stamp(tools_dir).is_file() and _stamp(tools_dir).read_text() == LOCK.read_text():
        return
    progress(f"installing the Flink peer's Python environment into {venv_dir(tools_dir)} (once, ~1 min)")
    uv = shutil.which("uv", path=str(Path(sys.executable).parent)) or shutil.which("uv")
    if uv is None:
        raise FlinkSetupError("uv not found beside the project's Python: run `make install` first")
    log = tools_dir / "logs" / "flink-venv.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("w") as out:
        for command in ([uv, "venv", "-q", "--clear", "--python", PYTHON_VERSION, str(venv_dir(tools_dir))],
                        [uv, "pip", "install", "-q", "--python", str(python(tools_dir)), "--require-hashes",
                         "-r", str(LOCK)]):
            if subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, check=False).returncode != 0:
                raise FlinkSetupError(f"installing the Flink peer's environment failed at `{' '.join(command)}`; "
                                      f"its output is in {log}. Delete {venv_dir(tools_dir)} and run again.")
    _stamp(tools_dir).write_text(LOCK.read_text())


def jars(tools_dir: Path) -> tuple[list[Path], list[Path]]:
    """(the JVM's own class path, the job's jars), from the installed profile."""
    every = sorted(profile_dir(tools_dir, PROFILE).glob("*.jar"))
    parent = [j for j in every if j.name.startswith(PARENT_CLASSPATH)]
    return parent, [j for j in every if j not in parent]


def common_spec(settings: Settings, checkpoints: Path, checkpoint_seconds: float, parallelism: int) -> dict:
    """What every Flink peer job is given: the broker, the lake's catalog, and Flink's own settings."""
    _, job_jars = jars(settings.tools_dir)
    return {
        "bootstrap": settings.kafka.bootstrap,
        "catalog": {
            "type": "iceberg",
            "catalog-type": "hive",
            "uri": settings.metastore.uri,
            "warehouse": settings.s3.warehouse,
            "io-impl": "org.apache.iceberg.aws.s3.S3FileIO",
            **s3_properties(settings),
        },
        "flink": {
            "pipeline.jars": ";".join(j.as_uri() for j in job_jars),
            "parallelism.default": str(parallelism),
            "execution.checkpointing.interval": f"{int(checkpoint_seconds * 1000)}ms",
            "execution.checkpointing.mode": "EXACTLY_ONCE",
            "state.checkpoints.dir": checkpoints.as_uri(),
            "classloader.check-leaked-classloader": "false",
        },
    }


def job_spec(settings: Settings, topic: str, table: str, checkpoint_seconds: float, parallelism: int) -> dict:
    """The click job's settings as plain values (flink_job.py reads nothing else)."""
    db = settings.mariadb
    checkpoints = settings.run_dir / "peers" / f"{table.replace('.', '_')}-flink-checkpoints"
    return {
        **common_spec(settings, checkpoints, checkpoint_seconds, parallelism),
        "topic": topic,
        "table": table,
        "required": [f.name for f in click_contract().fields if f.required],
        # MariaDB's driver takes the MySQL URL scheme only when told to; Flink's JDBC connector
        # picks its MySQL dialect by that scheme
        "jdbc_url": f"jdbc:mysql://{db.host}:{db.port}/{db.database}?permitMysqlScheme",
        "jdbc_user": db.cdc_user,
        "jdbc_password": secret(db.cdc_password, "mariadb.cdc_password"),
    }


def write_spec(path: Path, spec: dict) -> Path:
    """A job's JSON file (it holds logins and keys: readable by its owner only)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.touch(mode=0o600)
    path.write_text(json.dumps(spec, indent=2))
    return path


def write_job(settings: Settings, topic: str, table: str, checkpoint_seconds: float, parallelism: int) -> Path:
    """The click job's JSON file."""
    return write_spec(settings.run_dir / "peers" / f"{table.replace('.', '_')}-flink.json",
                      job_spec(settings, topic, table, checkpoint_seconds, parallelism))


def environment(tools_dir: Path) -> dict[str, str]:
    """Environment of the job's process: Hadoop and the metastore client on the JVM's own class path."""
    parent, _ = jars(tools_dir)
    return {"HADOOP_CLASSPATH": ":".join(str(j) for j in parent), "PYTHONPATH": str(Path(__file__).parents[2])}
