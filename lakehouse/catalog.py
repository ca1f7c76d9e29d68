"""The Iceberg catalog every engine shares, described once from settings.

Spark (``spark.sql.catalog.<name>.*``), PyIceberg (``load_catalog`` properties) and the
freshness probe all take their catalog properties from here, so an endpoint or a
credential is never restated per engine.
"""

from __future__ import annotations

from lakehouse.settings import Settings, secret

#: Iceberg's S3FileIO for s3:// paths and Hadoop's local filesystem for file:// ones: the
#: Iceberg streaming source writes its initial offset into the Spark checkpoint (a local
#: folder, or a volume in Kubernetes) through the table's FileIO.
RESOLVING_FILE_IO = "org.apache.iceberg.io.ResolvingFileIO"


def s3_properties(settings: Settings) -> dict[str, str]:
    """S3 client properties understood by both Iceberg-Java and PyIceberg."""
    s3 = settings.s3
    return {
        "s3.endpoint": s3.endpoint,
        "s3.path-style-access": "true",
        "s3.access-key-id": secret(s3.access_key, "s3.access_key"),
        "s3.secret-access-key": secret(s3.secret_key, "s3.secret_key"),
        "s3.region": s3.region,
        "client.region": s3.region,
    }


def java_catalog_properties(settings: Settings) -> dict[str, str]:
    """Properties of Iceberg-Java's HiveCatalog (Spark's SparkCatalog passes them through)."""
    return {
        "type": "hive",
        "uri": settings.metastore.uri,
        "warehouse": settings.s3.warehouse,
        "io-impl": RESOLVING_FILE_IO,
        # A writer that reads what it just committed must not see a cached, stale table.
        "cache-enabled": "false",
        **s3_properties(settings),
    }


def pyiceberg_catalog(settings: Settings, kind: type | None = None):
    """A PyIceberg HiveCatalog on the shared metastore (``kind``: a subclass of it to make instead)."""
    # deferred: pyiceberg loads pyarrow: only for callers that open a catalog
    from pyiceberg.catalog.hive import HiveCatalog

    return (kind or HiveCatalog)(
        settings.catalog.name,
        uri=settings.metastore.uri,
        warehouse=settings.s3.warehouse,
        # The metastore is Hive 2.3.10 (every runtime): a commit writes the table's columns into it,
        # and 2.3.10 has no "timestamp with local time zone" type for Iceberg's timestamptz.
        **{"hive.hive2-compatible": "true"},
        **s3_properties(settings),
    )
