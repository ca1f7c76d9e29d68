"""A benchmark's own world is removed once its figures are read: database, topics, tables and their files."""

from __future__ import annotations

import uuid
from urllib.parse import urlparse

import pyarrow as pa
import pymysql
import pytest
from confluent_kafka.admin import NewTopic
from pyiceberg.exceptions import NoSuchTableError

from deploy.local.services.broker import admin_client
from deploy.local.services.mariadb import connect, create_source_database
from deploy.local.services.object_store import s3_client
from lab.bench.scratch import discard
from lakehouse.catalog import pyiceberg_catalog


def test_discard_drops_the_runs_database_topics_tables_and_their_files(settings):
    tag = uuid.uuid4().hex[:8]
    database, topic, table = f"shop_bench_{tag}", f"bench_{tag}", f"bench.scratch_{tag}"
    create_source_database(settings, database)
    admin = admin_client(settings)
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result()
    catalog = pyiceberg_catalog(settings)
    catalog.create_namespace_if_not_exists("bench")
    iceberg = catalog.create_table(table, pa.schema([("k", pa.string())]))
    iceberg.append(pa.table({"k": ["a", "b"]}))
    url = urlparse(iceberg.metadata.location)
    objects = s3_client(settings).list_objects_v2(Bucket=url.netloc, Prefix=url.path.lstrip("/") + "/")
    assert objects["KeyCount"] >= 3  # metadata, manifest list, manifest, data file

    assert discard(settings, [table, f"bench.never_made_{tag}"], [topic], database) == [
        f"table bench.never_made_{tag}: " + str(_missing(catalog, f"bench.never_made_{tag}"))]

    with pytest.raises(NoSuchTableError):
        catalog.load_table(table)
    assert s3_client(settings).list_objects_v2(Bucket=url.netloc, Prefix=url.path.lstrip("/") + "/")["KeyCount"] == 0
    assert topic not in admin.list_topics(timeout=10).topics
    with pytest.raises(pymysql.err.OperationalError):
        connect(settings, database=database).close()


def _missing(catalog, name: str) -> Exception:
    try:
        catalog.load_table(name)
    except NoSuchTableError as exc:
        return exc
    raise AssertionError(f"{name} exists")


def test_discard_refuses_a_database_that_is_not_a_benchmarks(settings):
    with pytest.raises(ValueError, match="not a benchmark's database"):
        discard(settings, [], [], settings.mariadb.database)
