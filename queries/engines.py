"""Open a query engine by name: the one place the CLI's commands (query, sql, bench) get one."""

from __future__ import annotations

from lakehouse.settings import Settings

ENGINES = ("duckdb", "spark", "trino")


def open_engine(name: str, settings: Settings):
    """DuckDB reads the tables directly (local stack); Spark is the reference; Trino is the cluster's."""
    if name == "duckdb":
        # deferred: each engine's client library loads only when that engine is chosen
        from queries.duckdb_engine import DuckDBEngine

        return DuckDBEngine(settings)
    if name == "spark":
        # deferred: pyspark, only for --engine spark
        from queries.spark_engine import SparkEngine

        return SparkEngine(settings)
    if name == "trino":
        # deferred: the trino client, only for --engine trino
        from queries.trino_engine import TrinoEngine

        return TrinoEngine(settings)
    raise ValueError(f"unknown engine {name!r}; choose one of {', '.join(ENGINES)}")


def open_session(name: str, settings: Settings, schema: str | None = None, service: bool = True):
    """A session on engine ``name``: ``execute(statement) -> Outcome``, ``schema``, ``engine_name``.

    On DuckDB, the local stack's SQL service (``queries.server``) when it answers and
    ``service`` allows: a warm engine, so a one-shot question costs the query. Otherwise an
    in-process SqlSession; DuckDB and Spark answer SHOW/DESCRIBE from the catalog there.
    """
    if name == "duckdb" and service:
        # deferred: the local SQL service's client: only when the service is used
        from queries.client import RemoteSession, service_answers
        from queries.library import render

        if service_answers(settings.query.host, settings.query.port):
            return RemoteSession(settings.query.host, settings.query.port, schema,
                                 render_placeholders=lambda sql: render(sql, settings))
    # deferred: the in-process session loads its engine; a remote one needs none
    from queries.session import SqlSession

    engine = open_engine(name, settings)
    names = (settings.catalog.trino_catalog, settings.catalog.name)
    return SqlSession(engine, getattr(engine, "catalogue", None), names, schema)
