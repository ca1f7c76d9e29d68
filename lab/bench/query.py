"""`lakehouse bench query`: how long a question takes, the way a user asks it, per engine.

Three figures per engine (DuckDB, the local SQL service's; Trino 476, the card's), each the
median of a few runs on the local stack, against the same table:

- one-shot: ``lakehouse query --sql "SELECT count(*) ..."`` on the click table, as a new
  process (start-up, imports, catalog lookup, DuckDB, output);
- in the shell: the same statement in a running session (``lakehouse sql``);
- each library query (queries/sql) in a running session, against a click table of
  ``rows`` rows (1 M by default) with position deletes, made for the run with Spark.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field

from lab.soak.services import child_env
from lakehouse.settings import Settings
from pipeline.aggregates.tables import ensure_aggregate_tables
from pipeline.cdc.dimension_tables import ensure_dimension_tables
from pipeline.spark_session import build_session
from pipeline.tables import ensure_clicks_tables, ensure_daily_table
from queries import library
from queries.engines import open_session

#: how far back queries/sql/time_travel.sql looks
TIME_TRAVEL_S = 60
#: goals of issue 30
ONE_SHOT_GOAL_S, SHELL_GOAL_S, LIBRARY_GOAL_S = 1.0, 0.3, 1.0


@dataclass
class QueryBenchResult:
    engine: str
    rows: int
    deleted: int
    one_shot_s: float
    shell_s: float
    library_s: dict[str, float] = field(default_factory=dict)

    def as_dict(self) -> dict:
        return asdict(self)


def _median_wall(command: list[str], env: dict[str, str], runs: int) -> float:
    times = []
    for _ in range(runs):
        began = time.monotonic()
        subprocess.run(command, env=env, capture_output=True, check=True)
        times.append(time.monotonic() - began)
    return statistics.median(times)


def build_table(settings: Settings, rows: int, progress=print) -> tuple[Settings, int, float]:
    """A click table of ``rows`` rows over three days, 1 % of them deleted by position deletes.

    Returns the run's settings, the rows deleted and when (monotonic) the rows were committed.
    """

    s = settings.model_copy(deep=True)
    tag = time.strftime("%Y%m%d%H%M%S")
    s.catalog.clicks_table, s.catalog.dead_letter_table = f"bench.query_clicks_{tag}", f"bench.query_dead_{tag}"
    spark = build_session(s, "lakehouse-bench-query")
    try:
        progress(f"writing {rows:,} clicks into {s.catalog.clicks_table} with Spark")
        ensure_clicks_tables(spark, s)
        ensure_daily_table(spark, s)  # the library's other tables, empty if nothing wrote them yet
        ensure_dimension_tables(s)
        ensure_aggregate_tables(s)
        table = s.catalog.clicks_table
        spark.sql(f"""
            INSERT INTO {table}
            SELECT uuid(), CAST(10 + id % 90 AS INT), CAST(100000 + id % 5000 AS STRING), CAST(id % 20 AS STRING),
                   'c' || CAST(id % 40000 AS STRING), CAST(id % 20 AS INT), 0, 'p' || CAST(id % 20 AS STRING),
                   CAST(id % 20 AS DECIMAL(10,4)), CAST(id % 4 AS INT),
                   current_timestamp() - make_interval(0, 0, 0, 0, 0, 0, id * 0.25),
                   current_timestamp(), current_timestamp(), 'bench', CAST(id % 3 AS INT), id
            FROM range({rows})""")
        written = time.monotonic()
        spark.sql(f"ALTER TABLE {table} SET TBLPROPERTIES ('write.delete.mode'='merge-on-read')")
        spark.sql(f"DELETE FROM {table} WHERE kafka_offset % 100 = 7")  # position deletes the readers apply
        deleted = rows - spark.table(table).count()
    finally:
        spark.stop()
    return s, deleted, written


def run(settings: Settings, rows: int = 1_000_000, runs: int = 3, progress=print,
        engines: tuple[str, ...] = ("duckdb",)) -> list[QueryBenchResult]:
    if "trino" in engines:
        # deferred: the local stack's services, only to start Trino on first use
        from deploy.local.stack import LocalStack

        LocalStack(settings).ensure("trino", progress=progress)
    s, deleted, written = build_table(settings, rows, progress)
    results = [_one_engine(s, engine, rows, deleted, runs, progress) for engine in engines]
    wait = TIME_TRAVEL_S + 1 - (time.monotonic() - written)
    if wait > 0:  # the time-travel query reads the table as it was a minute ago: let it have a past
        progress(f"waiting {wait:.0f} s until the table is a minute old (the time-travel query)")
        time.sleep(wait)
    for result in results:
        session = open_session(result.engine, s)
        session.execute("SELECT 1")  # the session's first statement opens its connections: not a figure
        for query in library.all_queries():
            try:
                times = [session.execute(query.template).seconds for _ in range(runs)]
            except Exception as exc:  # noqa: BLE001 - a query that cannot run is reported, not fatal
                progress(f"  {result.engine} {query.name}: failed ({str(exc).splitlines()[0][:120]})")
                continue
            result.library_s[query.name] = round(statistics.median(times), 3)
    return results


def _one_engine(s: Settings, engine: str, rows: int, deleted: int, runs: int, progress) -> QueryBenchResult:
    count = f"SELECT count(*) AS n FROM {s.catalog.clicks_table}"
    progress(f"{engine}: one-shot `lakehouse query --engine {engine} --sql \"{count}\"`, median of {runs}")
    one_shot = _median_wall([sys.executable, "-m", "cli", "query", "--engine", engine, "--sql", count,
                             "--format", "csv"], child_env(s), runs)
    session = open_session(engine, s)
    session.execute(count)  # the session's first statement opens its connections: not a figure
    shell = statistics.median(session.execute(count).seconds for _ in range(max(runs, 5)))
    return QueryBenchResult(engine, rows, deleted, round(one_shot, 3), round(shell, 3))
