"""Trino through the ``trino`` client (the local stack's Trino 476, or a cluster's): the queries run as written."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
from tenacity import Retrying, retry_if_exception, stop_after_delay, wait_fixed

from lakehouse.settings import Settings
from queries.dialects import EngineGap, parse, pin_now, to_sql
from queries.library import render


class TrinoEngine:
    name = "trino"

    def __init__(self, settings: Settings):
        self.settings = settings

    def run(self, sql: str, now: dt.datetime | None = None, snapshots: dict[str, int] | None = None,
            schema: str | None = None) -> pa.Table:
        """Trino resolves the names itself (its catalog is ``catalog.trino_catalog``); ``schema`` is
        the session's schema, for bare table names."""
        # deferred: the trino client, only when the cluster's engine is used
        import trino
        import trino.exceptions

        if snapshots:
            raise EngineGap("pinning snapshots is only implemented for the DuckDB and Spark engines")
        sql = render(sql, self.settings)
        if now is not None:
            sql = to_sql(pin_now(parse(sql), now), "trino")
        t = self.settings.trino

        def query() -> tuple[list, list[str]]:
            with trino.dbapi.connect(host=t.host, port=t.port, user=t.user, catalog=self.settings.catalog.trino_catalog,
                                     schema=schema, timezone="UTC",  # as every engine of the project reads time
                                     http_scheme="http", request_timeout=t.timeout_seconds) as conn:
                cursor = conn.cursor()
                cursor.execute(sql)
                return cursor.fetchall(), [d[0] for d in cursor.description]

        # A coordinator whose one worker has not announced itself yet (just started, or its heartbeat missed on a
        # busy machine) answers NO_NODES_AVAILABLE: seen in a 10 M-row read-back right after Trino started.
        no_nodes = retry_if_exception(lambda e: isinstance(e, trino.exceptions.TrinoQueryError)
                                      and e.error_name == "NO_NODES_AVAILABLE")
        try:
            rows, names = Retrying(retry=no_nodes, stop=stop_after_delay(60), wait=wait_fixed(2), reraise=True)(query)
        except (OSError, trino.exceptions.TrinoConnectionError) as exc:
            raise EngineGap(f"Trino is not reachable at {t.host}:{t.port} ({str(exc)[:200]}). On the local stack "
                            "`lakehouse trino` starts it (or LAKEHOUSE_TRINO__START=always with `lakehouse stack up`); "
                            "for a cluster's Trino, forward its port "
                            f"(`kubectl -n lakehouse port-forward svc/trino {t.port}:8080`)") from None
        except trino.exceptions.TrinoQueryError as exc:
            raise EngineGap(f"Trino rejected the query: {exc.message}") from None
        return pa.Table.from_pylist([dict(zip(names, r)) for r in rows]) if rows else \
            pa.table({n: pa.array([], pa.null()) for n in names})
