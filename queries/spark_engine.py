"""Spark SQL over the same catalog: the reference the other engines are checked against.

The Trino query is transpiled with sqlglot, its table names resolved as on every engine
(``queries.names``) and written Spark's way (``lakehouse.ns.t``, ``lakehouse.ns.t.files``);
``snapshots`` pins data tables with ``VERSION AS OF`` so a comparison reads exactly the same
table state.
"""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
from sqlglot import exp

from lakehouse.settings import Settings
from queries.dialects import parse, pin_now, to_sql
from queries.library import render
from queries.names import Catalogue, resolve


class SparkEngine:
    name = "spark"

    def __init__(self, settings: Settings, spark=None):
        # deferred: pyspark and a JVM: only when the Spark engine is opened
        from pyspark.sql import SparkSession

        from pipeline.spark_session import build_session

        self.settings = settings
        # a session this engine started is this engine's to stop; one the process had already is not
        self.owned = spark is None and SparkSession.getActiveSession() is None
        self.spark = spark or build_session(settings, "lakehouse-query")
        self.catalogue = Catalogue.of(settings)

    def close(self) -> None:
        """Stop the session this engine started (left to the interpreter's exit, its JVM printed a stack trace of
        the tasks it was still scheduling)."""
        if self.owned:
            self.spark.stop()

    def run(self, sql: str, now: dt.datetime | None = None, snapshots: dict[str, int] | None = None,
            schema: str | None = None) -> pa.Table:
        tree = pin_now(parse(render(sql, self.settings)), now)
        for node, name in resolve(tree, self.catalogue, schema):
            self.catalogue.location(name)  # an unknown name is told with what exists, as on every engine
            spark_table = exp.to_table(name.spark(self.settings.catalog.name), dialect="spark")
            spark_table.set("alias", node.args.get("alias"))
            version = node.args.get("version")
            pinned = (snapshots or {}).get(name.identifier)
            if version is None and pinned is not None and not name.kind:
                version = exp.Version(this="VERSION", kind="AS OF", expression=exp.Literal.number(pinned))
            spark_table.set("version", version)
            node.replace(spark_table)
        df = self.spark.sql(to_sql(tree, "spark"))
        return pa.Table.from_pandas(df.toPandas(), preserve_index=False)
