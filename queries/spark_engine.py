"""Spark SQL over the same catalog: the reference the other engines are checked against.

The Trino query is transpiled with sqlglot; ``snapshots`` pins data tables with
``VERSION AS OF`` so a comparison reads exactly the same table state.
"""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
from sqlglot import exp

from lakehouse.settings import Settings
from queries.dialects import parse, pin_now, to_sql
from queries.library import render, spark_name


class SparkEngine:
    name = "spark"

    def __init__(self, settings: Settings, spark=None):
        from pipeline.spark_session import build_session

        self.settings = settings
        self.spark = spark or build_session(settings, "lakehouse-query")

    def run(self, template: str, now: dt.datetime | None = None,
            snapshots: dict[str, int] | None = None) -> pa.Table:
        sql, _ = render(template, self.settings, lambda ref: spark_name(self.settings, ref))
        tree = pin_now(parse(sql), now)
        pinned = {f"{self.settings.catalog.name}.{t}": s for t, s in (snapshots or {}).items()}
        for node in tree.find_all(exp.Table):
            full = ".".join(p.name for p in node.parts)
            if full in pinned and node.args.get("version") is None:
                node.set("version", exp.Version(this="VERSION", kind="AS OF",
                                                expression=exp.Literal.number(pinned[full])))
        df = self.spark.sql(to_sql(tree, "spark"))
        return pa.Table.from_pandas(df.toPandas(), preserve_index=False)
