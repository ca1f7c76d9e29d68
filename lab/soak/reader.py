"""The soak's reader: what a fixed set of queries costs a reader outside Spark, as the table ages.

Two figures per sample. *Wall* milliseconds are what a reader on this machine waits; on
two cores shared with the writer, the maintenance JVM and the broker they mostly measure
who else had the cores in that second (the same table read 55 ms at rest and 90 ms beside
three busy loops). *CPU* milliseconds are the reader's own work - load the metadata from
the metastore, read the manifests, open the files the filter keeps - which is what the
table's shape decides and maintenance controls; beside the same busy loops they moved
36 -> 37 ms. The soak's drift goal is judged on CPU, and wall time is reported beside it.

DuckDB runs with one thread so all of a query's work happens on the calling thread, whose
CPU time the kernel counts apart from any other thread.

Each sample is read by a fresh process (:func:`cost_in_fresh_process`), as a user's query
would be: read from inside the soak's own process, which also drives the click job, the
same table cost 37-49 ms of CPU late in an hour and 27-32 ms from a new process at the end,
so the drift partly measured the harness's aging heap and DuckDB connection, not the table.
"""

from __future__ import annotations

import json
import resource
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass

from lakehouse.errors import LakehouseError
from lakehouse.settings import Settings
from queries.duckdb_engine import DuckDBEngine

#: Reader queries over a fixed volume (the last minute of events at a steady rate), so a change in their
#: cost shows planning and file overhead - what maintenance controls - not a growing table.
SOAK_QUERIES = {
    "views by product, last minute": "SELECT productId, count(*) AS views FROM {clicks} "
                                     "WHERE event_time >= current_timestamp - INTERVAL '1' MINUTE GROUP BY productId",
    "one product, last minute": "SELECT uid, event_time, product_price FROM {clicks} "
                                "WHERE productId = '3' AND event_time >= current_timestamp - INTERVAL '1' MINUTE",
    "members, last minute": "SELECT member_level, count(DISTINCT uid) AS users FROM {clicks} "
                            "WHERE event_time >= current_timestamp - INTERVAL '1' MINUTE GROUP BY member_level",
}


@dataclass(frozen=True)
class ReaderCost:
    wall_ms: float  # median over the soak queries, each the best of its runs
    cpu_ms: float  # the same, in CPU time of the reading thread


def _thread_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_THREAD)
    return usage.ru_utime + usage.ru_stime


class SoakReader:
    """DuckDB over the soak's tables, one thread, measuring each query's wall and CPU time."""

    def __init__(self, settings: Settings, runs: int = 3):
        self.engine = DuckDBEngine(settings)
        self.engine.con.execute("SET threads = 1")
        self.runs = runs

    def cost(self) -> ReaderCost:
        """Best of ``runs`` per query (the least disturbed run), median over the queries."""
        walls, cpus = [], []
        for template in SOAK_QUERIES.values():
            best_wall = best_cpu = float("inf")
            for _ in range(self.runs):
                began, began_cpu = time.perf_counter(), _thread_cpu_s()
                self.engine.run(template)
                best_wall = min(best_wall, (time.perf_counter() - began) * 1000)
                best_cpu = min(best_cpu, (_thread_cpu_s() - began_cpu) * 1000)
            walls.append(best_wall)
            cpus.append(best_cpu)
        return ReaderCost(round(statistics.median(walls), 1), round(statistics.median(cpus), 1))


def cost_in_fresh_process(env: dict[str, str], runs: int = 3, timeout_s: float = 300) -> ReaderCost:
    """:meth:`SoakReader.cost` measured by a new Python process whose settings come from ``env``."""
    done = subprocess.run([sys.executable, "-m", "lab.soak.reader", str(runs)], env=env,
                          capture_output=True, text=True, timeout=timeout_s)
    if done.returncode != 0:
        raise LakehouseError(f"the soak reader failed (exit {done.returncode}): {done.stderr.strip()[-2000:]}")
    return ReaderCost(**json.loads(done.stdout.strip().splitlines()[-1]))


if __name__ == "__main__":
    from lakehouse.settings import load_settings

    print(json.dumps(asdict(SoakReader(load_settings(), runs=int(sys.argv[1]) if len(sys.argv) > 1 else 3).cost())))
