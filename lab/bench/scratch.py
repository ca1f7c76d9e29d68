"""A benchmark's own world (database, topics, Iceberg tables) removed once its figures are read.

Why: each run makes its own, so runs never see each other's data; kept, they filled the disk.
One 10 M-row CDC run leaves about 0.8 GB in MariaDB, 1-2 GB of binary log, ~2 GB of topic
and ~1 GB of table files; a day of runs filled 25 GB and slowed the database's loads.
``--keep`` on the commands skips this, to look at a run's tables afterwards.
"""

from __future__ import annotations

import logging
from urllib.parse import urlparse

from deploy.local.services.broker import admin_client
from deploy.local.services.object_store import s3_client
from lakehouse.catalog import pyiceberg_catalog
from lakehouse.settings import Settings
from lakehouse.source_database import connect

log = logging.getLogger(__name__)


def discard(s: Settings, tables: list[str], topics: list[str], database: str | None = None) -> list[str]:
    """Drop ``tables`` (and their files), delete ``topics``, drop ``database``; what could not go, as messages."""
    problems: list[str] = []
    catalog = pyiceberg_catalog(s)
    for name in tables:
        try:
            location = catalog.load_table(name).metadata.location
            catalog.drop_table(name)
            _delete_prefix(s, location)
        except Exception as exc:  # noqa: BLE001 - a table the run never made, or a store hiccup: say it, go on
            problems.append(f"table {name}: {exc}")
    if topics:
        admin = admin_client(s)  # held while its futures resolve: a collected client fails them (_DESTROY)
        for topic, future in admin.delete_topics(topics, operation_timeout=30).items():
            try:
                future.result()
            except Exception as exc:  # noqa: BLE001 - e.g. a topic the run never made
                problems.append(f"topic {topic}: {exc}")
    if database:
        if not database.startswith(("shop_bench_", "shop_system_")):
            raise ValueError(f"refusing to drop {database!r}: not a benchmark's database")
        with connect(s, database=None) as conn, conn.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS `{database}`")
    for problem in problems:
        log.warning("left behind: %s", problem)
    return problems


def _delete_prefix(s: Settings, location: str) -> None:
    """Every object under an ``s3://bucket/prefix`` location."""
    url = urlparse(location)
    client, prefix = s3_client(s, timeout=30), url.path.lstrip("/").rstrip("/") + "/"
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=url.netloc, Prefix=prefix):
        keys = [{"Key": item["Key"]} for item in page.get("Contents", [])]
        if keys:
            client.delete_objects(Bucket=url.netloc, Delete={"Objects": keys, "Quiet": True})
