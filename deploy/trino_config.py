"""Trino's configuration, written from the settings for both runtimes.

The Iceberg catalog file is one text: the local stack's Trino reads it from its config
folder and the cluster's coordinator from the ConfigMap ``k8s/base/generated`` holds, so the
catalog the local suite tests is the one the cluster runs. Credentials are never in it:
Trino substitutes ``${ENV:...}`` from its process environment (the local service passes them,
the cluster's pod takes them from the generated Secret).
"""

from __future__ import annotations

from lakehouse.settings import Settings


def properties(values: dict[str, str]) -> str:
    return "".join(f"{key}={value}\n" for key, value in values.items())


def iceberg_catalog(settings: Settings) -> str:
    """The ``iceberg`` catalog: the shared Hive Metastore and the S3 store, as Spark and the pipeline see them."""
    return properties({
        "connector.name": "iceberg",
        "iceberg.catalog.type": "hive_metastore",
        "hive.metastore.uri": settings.metastore.uri,
        "iceberg.file-format": "PARQUET",
        "fs.native-s3.enabled": "true",
        "s3.endpoint": settings.s3.endpoint,
        "s3.region": settings.s3.region,
        "s3.path-style-access": "true",
        "s3.aws-access-key": "${ENV:LAKEHOUSE_S3__ACCESS_KEY}",
        "s3.aws-secret-key": "${ENV:LAKEHOUSE_S3__SECRET_KEY}",
    })


def catalog_file_name(settings: Settings) -> str:
    """Trino names a catalog after its file: ``iceberg.properties`` is ``iceberg``, as the queries expect."""
    return f"{settings.catalog.trino_catalog}.properties"


def local_server(settings: Settings, data_dir: str) -> dict[str, str]:
    """The local server's own files: one node that coordinates and runs queries, bound to loopback."""
    t = settings.trino
    return {
        "node.properties": properties({
            "node.environment": "lakehouse",
            "node.id": "local",
            "node.data-dir": data_dir,
            "node.bind-ip": t.host,
            "node.internal-address": t.host,
        }),
        "config.properties": properties({
            "coordinator": "true",
            "node-scheduler.include-coordinator": "true",
            "http-server.http.port": str(t.port),
            "discovery.uri": f"http://{t.host}:{t.port}",
            "query.max-memory": f"{t.heap_mb // 2}MB",
            "query.max-memory-per-node": f"{t.heap_mb // 2}MB",
        }),
        "jvm.config": "\n".join([
            "-server", f"-Xmx{t.heap_mb}M", "-XX:+UseG1GC", "-XX:+ExitOnOutOfMemoryError",
            "-Djdk.attach.allowAttachSelf=true",
            # an IPv4 socket on 127.0.0.1, not an IPv6 one on the mapped address ::ffff:127.0.0.1
            "-Djava.net.preferIPv4Stack=true",
            "-Duser.timezone=UTC",
        ]) + "\n",
        # Airlift's start-up dump of every config property names the S3 access key (not marked secret)
        "log.properties": properties({"io.trino": "INFO", "Bootstrap": "WARN", "org.apache.iceberg": "WARN"}),
    }
