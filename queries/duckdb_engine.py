"""DuckDB over the shared Iceberg tables: the local stand-in for Trino.

Extensions come from PyPI packages and load offline (no auto-install). Table names are
resolved against the catalog (``queries.names``), located through the metastore
(PyIceberg) and read by metadata location with ``iceberg_scan``, which applies position
and equality deletes. Metadata tables (``"t$snapshots"``, ``$files``, ``$history``,
``$partitions``) come from PyIceberg's ``inspect``; ``FOR TIMESTAMP / VERSION AS OF`` is
resolved to a snapshot id through PyIceberg.
"""

from __future__ import annotations

import datetime as dt
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import urlparse

import duckdb
import pyarrow as pa
from sqlglot import exp

from lakehouse.settings import Settings, secret
from queries.dialects import EngineGap, parse, pin_now, to_sql
from queries.library import render
from queries.names import Catalogue, TableName, resolve

EXTENSIONS = ("httpfs", "avro", "iceberg")


def connect(settings: Settings) -> duckdb.DuckDBPyConnection:
    # deferred: the pinned extensions' files, needed only when a connection loads them
    import duckdb_extensions

    con = duckdb.connect(config={"autoinstall_known_extensions": "false", "autoload_known_extensions": "false"})
    for name in EXTENSIONS:
        duckdb_extensions.import_extension(name, con=con)
        con.execute(f"LOAD {name}")
    con.execute("SET TimeZone = 'UTC'")
    s3 = settings.s3
    endpoint = urlparse(s3.endpoint).netloc
    # Literals, not parameters: DuckDB 1.5 took 0.5 s to prepare the parameterised form, 1 ms for this one.
    values = [secret(s3.access_key, "s3.access_key"), secret(s3.secret_key, "s3.secret_key"), s3.region, endpoint]
    key, secret_key, region, host = ("'" + v.replace("'", "''") + "'" for v in values)
    con.execute(f"CREATE OR REPLACE SECRET lakehouse_s3 (TYPE s3, KEY_ID {key}, SECRET {secret_key}, "
                f"REGION {region}, ENDPOINT {host}, URL_STYLE 'path', USE_SSL false)")
    return con


def _whole_units(tree: exp.Expression) -> exp.Expression:
    """Trino's date_diff counts whole units elapsed; DuckDB's counts boundaries crossed (its date_sub matches)."""
    def swap(node):
        if isinstance(node, exp.DateDiff):
            unit = exp.Literal.string((node.unit.name if node.unit else "day").lower())
            return exp.Anonymous(this="date_sub", expressions=[unit, node.expression, node.this])
        return node

    return tree.transform(swap)


def _view_name(name: TableName, snapshot: int | None) -> str:
    return f"{name.namespace}__{name.table}__{name.kind or 'data'}" + (f"__at_{snapshot}" if snapshot else "")


class DuckDBEngine:
    """One DuckDB connection; keep the engine to keep its metadata cache (the shell does)."""

    name = "duckdb"

    def __init__(self, settings: Settings):
        self.settings = settings
        # Loading the extensions takes 0.3 s, with the GIL released: it overlaps the first
        # query's parsing and catalog lookups instead of coming before them.
        pool = ThreadPoolExecutor(1, thread_name_prefix="duckdb-connect")
        self._connecting = pool.submit(connect, settings)
        pool.shutdown(wait=False)  # the thread ends when the connection is made
        self.catalogue = Catalogue.of(settings)
        #: metadata tables already registered, by (table, kind, snapshot): a new commit is a new key
        #: (namespace, table, kind) -> the one Arrow view registered for it (older snapshots' are dropped)
        self._registered: dict[tuple[str, str, str], str] = {}

    @property
    def con(self) -> duckdb.DuckDBPyConnection:
        return self._connecting.result()

    def run(self, sql: str, now: dt.datetime | None = None, snapshots: dict[str, int] | None = None,
            schema: str | None = None) -> pa.Table:
        """Answer Trino SQL; ``snapshots`` pins tables (namespace.table -> snapshot id); ``schema``
        is where a bare table name is looked for (``USE schema``)."""
        tree = _whole_units(pin_now(parse(render(sql, self.settings)), now))
        for node, name in resolve(tree, self.catalogue, schema):
            snapshot = (snapshots or {}).get(name.identifier)
            version = node.args.get("version")
            if version is not None:
                if name.kind:
                    raise EngineGap("time travel on a metadata table is not supported on DuckDB; use Trino")
                snapshot = self._resolve_version(name, version)
                node.set("version", None)
            view = self._view(name, snapshot)
            node.set("catalog", None)
            node.set("db", None)
            node.set("this", exp.to_identifier(view))
        try:
            return self.con.execute(to_sql(tree, "duckdb")).to_arrow_table()
        except duckdb.Error as exc:
            raise EngineGap(f"DuckDB could not run this Trino query ({str(exc).splitlines()[0]}); "
                            "run it on Trino (`--engine trino`, Kubernetes) or Spark (`--engine spark`)") from None

    def _resolve_version(self, name: TableName, version: exp.Version) -> int:
        value = self.con.execute(f"SELECT {to_sql(version.expression, 'duckdb')}").fetchone()[0]
        if str(version.this).upper() == "VERSION":
            return int(value)
        table = self.catalogue.load(name)
        when = value if isinstance(value, dt.datetime) else dt.datetime.fromisoformat(str(value))
        when = when.replace(tzinfo=dt.timezone.utc) if when.tzinfo is None else when
        snapshot = table.snapshot_as_of_timestamp(int(when.timestamp() * 1000))
        if snapshot is None:
            raise EngineGap(f"{name.identifier} has no snapshot as old as {when.isoformat()}")
        return snapshot.snapshot_id

    def _view(self, name: TableName, snapshot: int | None) -> str:
        """The name of a view reading ``name`` at ``snapshot`` (None: the newest commit).

        A data view is redefined on every query from the metadata file the metastore names
        now (DuckDB reads it when the query runs), so a query always sees the newest commit;
        a metadata table is built by PyIceberg once per snapshot, and replaces the one built for
        an older snapshot (a long-running SQL service would otherwise keep every one in memory).
        """
        if not name.kind:
            view = _view_name(name, snapshot)
            pinned = f", snapshot_from_id => {int(snapshot)}" if snapshot else ""
            location = self.catalogue.location(name).replace("'", "''")
            self.con.execute(f"CREATE OR REPLACE VIEW {view} AS SELECT * FROM iceberg_scan('{location}'{pinned})")
            return view
        table = self.catalogue.load(name)
        current = table.current_snapshot()
        at = snapshot or (current.snapshot_id if current else None)
        view = _view_name(name, at)
        key = (name.namespace, name.table, name.kind)
        previous = self._registered.get(key)
        if previous != view:
            inspect = table.inspect
            arrow = {"snapshots": inspect.snapshots, "history": inspect.history}.get(name.kind)
            self.con.register(view, arrow() if arrow else getattr(inspect, name.kind)(snapshot_id=at))
            if previous is not None:
                self.con.unregister(previous)
            self._registered[key] = view
        return view
