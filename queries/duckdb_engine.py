"""DuckDB over the shared Iceberg tables: the local stand-in for Trino.

Extensions come from PyPI packages and load offline (no auto-install). Tables are
located through the metastore (PyIceberg), then read by metadata location with
``iceberg_scan``, which applies position and equality deletes.
"""

from __future__ import annotations

from urllib.parse import urlparse

import duckdb

from lakehouse.catalog import pyiceberg_catalog
from lakehouse.settings import Settings, secret

EXTENSIONS = ("httpfs", "avro", "iceberg")


def connect(settings: Settings) -> duckdb.DuckDBPyConnection:
    import duckdb_extensions

    con = duckdb.connect(config={"autoinstall_known_extensions": "false", "autoload_known_extensions": "false"})
    for name in EXTENSIONS:
        duckdb_extensions.import_extension(name, con=con)
        con.execute(f"LOAD {name}")
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
