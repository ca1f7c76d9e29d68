"""A Hive catalog that does not read back its own last metadata file, on the real metastore and S3."""

from __future__ import annotations

import pickle
import uuid

import pyarrow as pa
import pytest
from pyiceberg.schema import Schema
from pyiceberg.serializers import FromInputFile
from pyiceberg.types import LongType, NestedField

from lakehouse.catalog import pyiceberg_catalog
from pipeline.lake_writer.pyiceberg_internals import HeldMetadataHiveCatalog

pytestmark = pytest.mark.stack

SCHEMA = Schema(NestedField(1, "id", LongType(), required=False))


@pytest.fixture
def metadata_reads(monkeypatch) -> list[str]:
    """The metadata files parsed from the object store, by location (PyIceberg's reader, spied on)."""
    reads: list[str] = []
    parse = FromInputFile.table_metadata

    def counted(input_file, *args, **kwargs):
        reads.append(input_file.location)
        return parse(input_file, *args, **kwargs)

    monkeypatch.setattr(FromInputFile, "table_metadata", staticmethod(counted))
    return reads


def rows(*ids: int) -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64())})


def test_its_own_commits_are_not_read_back_and_another_writers_are(settings, metadata_reads):
    held = pyiceberg_catalog(settings, HeldMetadataHiveCatalog)
    plain = pyiceberg_catalog(settings)
    name = f"ods_test.held_{uuid.uuid4().hex[:8]}"
    held.create_namespace_if_not_exists("ods_test")
    table = held.create_table(name, SCHEMA)
    table.append(rows(1))
    metadata_reads.clear()
    for i in range(2, 5):  # each commit checks its requirements against the metastore's current file: its own last
        table.append(rows(i))
    assert metadata_reads == []
    assert held.load_table(name).metadata_location == table.metadata_location and metadata_reads == []
    assert pickle.loads(pickle.dumps(table.metadata)) == table.metadata  # the click job sends it to its tasks

    other = plain.load_table(name)  # another writer commits: the metastore points at a file the catalog never saw
    other.append(rows(5))
    metadata_reads.clear()
    # The stale table's commit is checked against the other's (read once, then held): it fails, and PyIceberg's retry
    # builds on the other's snapshot instead of hiding it.
    table.append(rows(6))
    assert metadata_reads == [other.metadata_location]
    assert table.metadata.snapshot_by_id(other.metadata.current_snapshot_id) is not None
    assert held.load_table(name).metadata_location == table.metadata_location
    assert metadata_reads == [other.metadata_location]
    assert sorted(plain.load_table(name).scan().to_arrow()["id"].to_pylist()) == [1, 2, 3, 4, 5, 6]
