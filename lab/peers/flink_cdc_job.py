"""Seed 004's design, as a CDC peer: Debezium changes from Kafka upserted into Iceberg by Flink's Iceberg sink.

What seed 004 describes for landing a binlog in Iceberg, in Flink SQL: each change topic read as
a changelog (Flink's ``debezium-json`` format turns an envelope into an insert, an update's
before and after, or a delete), and an ``INSERT INTO`` the dimension table with the sink's upsert
mode (``upsert-enabled``): every row written is preceded by an *equality delete* of its key (the
table's identifier field), so a reader drops every older row of that key when it reads. The sink
commits once per checkpoint; the source's offsets are in the same checkpoint (exactly once).

The tables are the ones this pipeline's apply writes (same schema, identifier field, no
partitioning), made by the benchmark beforehand. After a kill the job is started again from the
newest completed checkpoint, as Flink's own recovery would: the sink then commits what that
checkpoint wrote if the kill came before its commit, and the source goes on from its offsets.

This file runs in the Flink peer's own virtual environment (``flink_setup``): it imports nothing
but PyFlink, the standard library and ``flink_runtime``, and every setting arrives in the JSON file
named by its one argument (``lab.peers.cdc_flink`` writes it). It runs until SIGTERM.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from lab.peers.flink_runtime import run_until_stopped, table_environment


def _with(options: dict[str, str]) -> str:
    return ", ".join(f"'{key}' = '{value}'" for key, value in options.items())


def statements(job: dict) -> tuple[list[str], list[str]]:
    """(the DDL, the inserts): a changelog source per change topic, the catalog, an upsert per table."""
    ddl, inserts = [f"CREATE CATALOG lake WITH ({_with(job['catalog'])})"], []
    for n, source in enumerate(job["sources"]):
        kafka = {
            "connector": "kafka",
            "topic": source["topic"],
            "properties.bootstrap.servers": job["bootstrap"],
            "properties.group.id": job["group"],
            "scan.startup.mode": "earliest-offset",
            "format": "debezium-json",
            # the capture writes TIMESTAMP columns as ISO-8601 UTC text ("...Z"); a change it cannot read stops
            # the job (Flink's default), as the apply stops: nothing is skipped silently
            "debezium-json.timestamp-format.standard": "ISO-8601",
        }
        columns = ", ".join(f"`{name}` {kind}" for name, kind in source["columns"].items())
        ddl.append(f"CREATE TEMPORARY TABLE changes_{n} ({columns}) WITH ({_with(kafka)})")
        selected = ", ".join(source["select"])
        inserts.append(f"INSERT INTO lake.{source['table']} /*+ OPTIONS('upsert-enabled' = 'true') */ "
                       f"SELECT {selected} FROM changes_{n}")
    return ddl, inserts


def newest_checkpoint(directory: Path) -> Path | None:
    """The newest completed checkpoint under ``directory`` (a ``chk-N`` folder holding ``_metadata``)."""
    done = [m.parent for m in directory.glob("*/chk-*/_metadata")]
    return max(done, key=lambda d: int(d.name.removeprefix("chk-")), default=None)


def main(job_file: str) -> None:
    """Submit the job to a local mini-cluster, from the newest checkpoint if any, and run it until SIGTERM."""
    job = json.loads(Path(job_file).read_text())
    env = table_environment(job)
    restored = newest_checkpoint(Path(job["checkpoints"]))
    if restored is not None:
        env.get_config().set("execution.savepoint.path", restored.as_uri())
        print(f"restoring from {restored}", flush=True)
    ddl, inserts = statements(job)
    for statement in ddl:
        env.execute_sql(statement)
    statement_set = env.create_statement_set()
    for insert in inserts:
        statement_set.add_insert_sql(insert)
    run_until_stopped(statement_set.execute().get_job_client())  # runs in this process's mini-cluster


if __name__ == "__main__":
    main(sys.argv[1])
