"""DuckDB over the shared Iceberg tables: the local stand-in for Trino.

Extensions come from PyPI packages and load offline (no auto-install). Tables are
located through the metastore (PyIceberg) and read by metadata location with
``iceberg_scan``, which applies position and equality deletes. Metadata tables
(``{t:snapshots}``, ``{t:files}``) come from PyIceberg's ``inspect``; ``FOR TIMESTAMP /
VERSION AS OF`` is resolved to a snapshot id through PyIceberg.
"""

from __future__ import annotations

import datetime as dt
from urllib.parse import urlparse

import duckdb
import pyarrow as pa
from sqlglot import exp

from lakehouse.catalog import pyiceberg_catalog
from lakehouse.settings import Settings, secret
from queries.dialects import EngineGap, parse, pin_now, to_sql
from queries.library import TableRef, render

EXTENSIONS = ("httpfs", "avro", "iceberg")


def connect(settings: Settings) -> duckdb.DuckDBPyConnection:
    import duckdb_extensions

    con = duckdb.connect(config={"autoinstall_known_extensions": "false", "autoload_known_extensions": "false"})
    for name in EXTENSIONS:
        duckdb_extensions.import_extension(name, con=con)
        con.execute(f"LOAD {name}")
    con.execute("SET TimeZone = 'UTC'")
    s3 = settings.s3
    endpoint = urlparse(s3.endpoint).netloc
    con.execute(
        "CREATE OR REPLACE SECRET lakehouse_s3 (TYPE s3, KEY_ID ?, SECRET ?, REGION ?, ENDPOINT ?, "
        "URL_STYLE 'path', USE_SSL false)",
        [secret(s3.access_key, "s3.access_key"), secret(s3.secret_key, "s3.secret_key"), s3.region, endpoint],
    )
    return con


def metadata_location(settings: Settings, table: str) -> str:
    """The current metadata file of a table, as the metastore says."""
    return pyiceberg_catalog(settings).load_table(table).metadata_location


def scan_sql(settings: Settings, table: str) -> str:
    """A DuckDB table expression reading the table's current snapshot."""
    return f"iceberg_scan('{metadata_location(settings, table)}')"


def _whole_units(tree: exp.Expression) -> exp.Expression:
    """Trino's date_diff counts whole units elapsed; DuckDB's counts boundaries crossed (its date_sub matches)."""
    def swap(node):
        if isinstance(node, exp.DateDiff):
            unit = exp.Literal.string((node.unit.name if node.unit else "day").lower())
            return exp.Anonymous(this="date_sub", expressions=[unit, node.expression, node.this])
        return node

    return tree.transform(swap)


def _view_name(ref: TableRef, snapshot: int | None = None) -> str:
    return f"{ref.role}__{ref.kind or 'data'}" + (f"__at_{snapshot}" if snapshot else "")


class DuckDBEngine:
    name = "duckdb"

    def __init__(self, settings: Settings):
        self.settings = settings
        self.con = connect(settings)
        self.catalog = pyiceberg_catalog(settings)

    def run(self, template: str, now: dt.datetime | None = None,
            snapshots: dict[str, int] | None = None) -> pa.Table:
        """Answer a query template; ``snapshots`` pins tables (namespace.table -> snapshot id)."""
        refs: dict[str, TableRef] = {}

        def name_for(ref: TableRef) -> str:
            refs[_view_name(ref)] = ref
            return _view_name(ref)

        sql, _ = render(template, self.settings, name_for)
        tree = _whole_units(pin_now(parse(sql), now))
        for node in list(tree.find_all(exp.Table)):
            ref = refs.get(node.name)
            if ref is None:
                continue
            version = node.args.get("version")
            snapshot = (snapshots or {}).get(ref.table)
            if version is not None:
                if ref.kind:
                    raise EngineGap("time travel on a metadata table is not supported on DuckDB; use Trino")
                snapshot = self._resolve_version(ref, version)
                node.set("version", None)
            name = _view_name(ref, snapshot)
            self._register(name, ref, snapshot)
            node.set("this", exp.to_identifier(name))
        try:
            return self.con.execute(to_sql(tree, "duckdb")).fetch_arrow_table()
        except duckdb.Error as exc:
            raise EngineGap(f"DuckDB could not run this Trino query ({str(exc).splitlines()[0]}); "
                            "run it on Trino (`--engine trino`, Kubernetes) or Spark (`--engine spark`)") from None

    def _resolve_version(self, ref: TableRef, version: exp.Version) -> int:
        table = self.catalog.load_table(ref.table)
        value = self.con.execute(f"SELECT {to_sql(version.expression, 'duckdb')}").fetchone()[0]
        if str(version.this).upper() == "VERSION":
            return int(value)
        when = value if isinstance(value, dt.datetime) else dt.datetime.fromisoformat(str(value))
        when = when.replace(tzinfo=dt.timezone.utc) if when.tzinfo is None else when
        snapshot = table.snapshot_as_of_timestamp(int(when.timestamp() * 1000))
        if snapshot is None:
            raise EngineGap(f"{ref.table} has no snapshot as old as {when.isoformat()}")
        return snapshot.snapshot_id

    def _register(self, name: str, ref: TableRef, snapshot: int | None) -> None:
        table = self.catalog.load_table(ref.table)
        if ref.kind == "snapshots":
            self.con.register(name, table.inspect.snapshots())
        elif ref.kind == "files":
            self.con.register(name, table.inspect.files(snapshot_id=snapshot))
        else:
            pinned = f", snapshot_from_id => {int(snapshot)}" if snapshot else ""
            self.con.execute(f"CREATE OR REPLACE VIEW {name} AS "
                             f"SELECT * FROM iceberg_scan('{table.metadata_location}'{pinned})")
