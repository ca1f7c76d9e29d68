"""The click job's dimension snapshot survives a dimension read that fails.

A failed read of a dimension table (the object store down for a moment, a file not
there yet) must fail that batch only: once the files are readable again, the next
batch must read the dimensions afresh and commit. Spark keeps a failed cached plan
for good, so a cache of the dimensions that is registered before it is materialised
turned one failed read into failed batches for as long as the job ran.
"""

from __future__ import annotations

from urllib.parse import urlparse

import pytest

from deploy.local.services.object_store import s3_client
from pipeline.clicks.job import ClickIngestJob
from tests.support.clicks import drain, rows


def _locations(spark, table: str) -> list[tuple[str, str]]:
    """(bucket, key) of every data and delete file of the table's current snapshot."""
    paths = [r.file_path for r in spark.sql(f"SELECT file_path FROM {table}.files").collect()]
    return [(urlparse(p).netloc, urlparse(p).path.lstrip("/")) for p in paths]


def _move(s3, locations, suffix_from: str, suffix_to: str) -> None:
    for bucket, key in locations:
        s3.copy_object(Bucket=bucket, Key=key + suffix_to, CopySource={"Bucket": bucket, "Key": key + suffix_from})
        s3.delete_object(Bucket=bucket, Key=key + suffix_from)


def test_a_failed_dimension_read_fails_one_batch_not_the_ones_after(spark, click_settings, producer):
    cat = click_settings.catalog
    job = ClickIngestJob(spark, click_settings)
    spark.sql(f"INSERT INTO {cat.products_table} VALUES ('1', 'test01', 'd', 1.1000, current_timestamp())")
    producer.send(20, productId="1")
    drain(job)
    spark.sql(f"UPDATE {cat.products_table} SET name = 'renamed' WHERE productId = '1'")
    s3, hidden = s3_client(click_settings), _locations(spark, cat.products_table)
    assert hidden, "the product table has files"
    _move(s3, hidden, "", ".hidden")
    producer.send(20, productId="1")
    try:
        with pytest.raises(Exception):  # noqa: B017 - whatever Spark raises for a missing file
            job.run_once()
    finally:
        _move(s3, hidden, ".hidden", "")
    try:
        job.recover()
        assert drain(job) >= 1, "a batch commits once the dimension files are back"
    finally:
        job.close()
    names = [r.name for r in rows(spark, cat.clicks_table)]
    assert len(names) == len(producer.sent.valid) == 40
    assert sorted(set(names)) == ["renamed", "test01"]
    assert names.count("renamed") == 20
