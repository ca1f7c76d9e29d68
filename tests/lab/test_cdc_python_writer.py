"""The Python apply peer's writer at size (lab/peers/cdc_python_writer.py; pipeline/lake_writer/row_delta.py, fold.py)
on the real catalog and S3: a batch adds files in proportion to its changes, never rewrites the table;
every reader (PyIceberg, DuckDB, Spark, Trino) sees the rows MariaDB would hold; folding bounds the delete
files; a compaction by another writer is survived without bringing a row back."""

from __future__ import annotations

import json
import random
import time

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.manifest import DataFileContent

from lab.peers.cdc_python_writer import DimensionWriter
from lakehouse.catalog import pyiceberg_catalog
from lakehouse.job_settings import MaintenanceSettings
from pipeline.cdc.changes import CHANGE_SCHEMA
from pipeline.cdc.dimension_tables import committed_position, dimensions, ensure_dimension_tables
from pipeline.kafka_source import offsets as kafka_offsets
from pipeline.lake_writer.fold import FoldPolicy
from pipeline.lake_writer.live_rows import live_files

COLUMNS = {"userid": "userid", "name": "name", "show_params": "show_params", "member_level": "memberLevel",
           "update_time": "update_time"}


class Changes:
    """Member changes in binlog order, and the rows the source holds after them."""

    def __init__(self):
        self.position, self.state = 0, {}

    def batch(self, *changes: tuple[str, str, int | None]) -> pa.Table:
        rows = []
        for op, key, level in changes:
            self.position += 1
            after = None if op == "d" else {"userid": key, "name": f"n{key}", "show_params": None,
                                            "memberLevel": level, "update_time": "2026-11-26T00:00:00.000Z"}
            rows.append({"topic": "t", "partition": 0, "offset": self.position, "tbl": "user_member", "op": op,
                         "pk": key, "order_key": f"binlog.000001:{self.position:015d}:000000", "source_ts_ms": 0,
                         "envelope": json.dumps({"before": None, "after": after, "op": op})})
            if op == "d":
                self.state.pop(key, None)
            else:
                self.state[key] = level
        return pa.Table.from_pylist(rows, schema=CHANGE_SCHEMA)

    def props(self) -> dict[str, str]:
        return kafka_offsets.commit_properties({"t": {0: self.position}}, {})


@pytest.fixture
def members(settings):
    s = settings.model_copy(deep=True)
    stamp = time.time_ns()
    s.catalog.products_table, s.catalog.members_table = f"ods_test.p_{stamp}", f"ods_test.m_{stamp}"
    ensure_dimension_tables(s)
    return s, dimensions(s)["user_member"].table


def writer_for(s, table: str, fold_files: int = 1000, background_folds: bool = False) -> DimensionWriter:
    """Folds inside the batch that made them due (the default here: tests count files after each batch)."""
    return DimensionWriter(pyiceberg_catalog(s), table, "userid", COLUMNS, whole_table_rows=0,
                           policy=FoldPolicy(fold_files=fold_files, target_rows=2_000, tier_fan_in=min(fold_files, 8)),
                           background_folds=background_folds)


def levels(table) -> dict[str, int]:
    rows = table.scan(selected_fields=("userid", "member_level")).to_arrow()
    keys = rows.column("userid").to_pylist()
    assert len(keys) == len(set(keys)), "a key is in the table twice"
    return dict(zip(keys, rows.column("member_level").to_pylist(), strict=True))


def test_a_batch_adds_a_data_file_and_a_delete_file_and_rewrites_nothing(members):
    s, name = members
    changes, writer = Changes(), writer_for(*members)
    writer.apply(changes.batch(*(("r", f"k{i}", 0) for i in range(5000))), changes.props())
    before = {e.data_file.file_path for e in live_files(writer.table)}
    writer.apply(changes.batch(("u", "k1", 1), ("u", "k2", 2), ("d", "k3", None), ("c", "new", 5)), changes.props())
    after = [e.data_file for e in live_files(writer.table)]
    added = [f for f in after if f.file_path not in before]
    assert before <= {f.file_path for f in after}  # no file of the table was replaced
    assert sorted((f.content, f.record_count) for f in added) == [(0, 3), (1, 3)]  # 3 images; deletes for k1..k3
    assert levels(writer.table) == changes.state


def test_no_delete_is_written_for_a_key_no_file_holds(members):
    changes, writer = Changes(), writer_for(*members)
    writer.apply(changes.batch(("c", "a", 1)), changes.props())
    writer.apply(changes.batch(("c", "b", 1), ("c", "c", 1)), changes.props())
    assert not [e for e in live_files(writer.table) if e.data_file.content != 0]


def test_keys_deleted_and_inserted_again_within_and_across_batches_read_right_everywhere(members, spark, trino):
    from queries.duckdb_engine import DuckDBEngine

    s, name = members
    changes, writer = Changes(), writer_for(*members)
    writer.apply(changes.batch(*(("r", f"k{i}", 0) for i in range(100))), changes.props())
    writer.apply(changes.batch(("d", "k1", None), ("c", "k1", 7), ("u", "k2", 3), ("d", "k2", None)), changes.props())
    writer.apply(changes.batch(("d", "k5", None)), changes.props())
    writer.apply(changes.batch(("c", "k5", 8), ("u", "k6", 1), ("u", "k6", 2)), changes.props())
    assert levels(writer.table) == changes.state
    sql = f"SELECT userid, member_level FROM {name}"
    expected = sorted(changes.state.items())
    assert sorted((r["userid"], r["member_level"]) for r in DuckDBEngine(s).run(sql).to_pylist()) == expected
    assert sorted((r.userid, r.member_level) for r in spark.sql(f"SELECT * FROM {name}").collect()) == expected
    assert sorted((r["userid"], r["member_level"]) for r in trino.run(sql).to_pylist()) == expected
    restarted = writer_for(*members)  # a restart reads where each key is from the files and their deletes
    assert len(restarted.index) == len(changes.state)
    restarted.apply(changes.batch(("u", "k1", 9)), changes.props())
    assert levels(restarted.table) == changes.state


def test_folding_bounds_the_delete_files_and_keeps_every_row(members):
    changes, writer = Changes(), writer_for(*members, fold_files=4)
    writer.apply(changes.batch(*(("r", f"k{i}", 0) for i in range(6000))), changes.props())
    for n in range(12):
        writer.apply(changes.batch(*(("u", f"k{(n * 37 + j) % 6000}", n) for j in range(50)),
                                   ("d", f"k{n}", None), ("c", f"x{n}", n)), changes.props())
        files = [e.data_file for e in live_files(writer.table)]
        assert sum(1 for f in files if f.content != 0) <= 4 + 3  # folded every 4; file-scoped ones after a fold
    assert levels(writer.table) == changes.state
    assert any(not (snap.summary.additional_properties if snap.summary else {}).get(kafka_offsets.OFFSETS_PROPERTY)
               for snap in writer.table.snapshots())  # folds happened (they record no offsets)


def test_a_compaction_by_spark_between_batches_brings_no_row_back(members, spark):
    s, name = members
    changes, writer = Changes(), writer_for(*members)
    writer.apply(changes.batch(*(("r", f"k{i}", 0) for i in range(300))), changes.props())
    writer.apply(changes.batch(("u", "k1", 1), ("d", "k2", None)), changes.props())
    spark.sql(f"CALL {s.catalog.name}.system.rewrite_data_files(table => '{name}', "
              "options => map('delete-file-threshold', '1', 'min-input-files', '1'))").collect()
    writer.apply(changes.batch(("u", "k1", 2), ("d", "k4", None), ("c", "k2", 5)), changes.props())  # stale index
    assert levels(writer.catalog.load_table(name)) == changes.state
    assert sorted((r.userid, r.member_level) for r in spark.sql(f"SELECT * FROM {name}").collect()) == \
        sorted(changes.state.items())


def test_a_column_added_to_the_table_reads_null_in_older_rows_through_a_fold(members):
    from pyiceberg.types import StringType

    s, name = members
    changes, writer = Changes(), writer_for(*members, fold_files=2)
    writer.apply(changes.batch(*(("r", f"k{i}", 0) for i in range(200))), changes.props())
    with writer.table.update_schema() as update:  # a user adds a column the source does not have
        update.add_column("segment", StringType())
    writer.reload()
    for n in range(3):  # folds read the older files by field id: they lack the column
        writer.apply(changes.batch(("u", f"k{n}", n + 1)), changes.props())
    rows = writer.table.scan().to_arrow()
    assert rows.num_rows == 200 and rows.column("segment").null_count == 200
    assert levels(writer.table) == changes.state


def test_a_table_shrinking_under_the_whole_table_size_sheds_its_delete_files(members):
    s, name = members
    changes, writer = Changes(), writer_for(*members)
    writer.apply(changes.batch(*(("r", f"k{i}", 0) for i in range(50))), changes.props())
    writer.apply(changes.batch(("u", "k1", 1), ("d", "k2", None)), changes.props())
    small = DimensionWriter(pyiceberg_catalog(s), name, "userid", COLUMNS, whole_table_rows=1_000)
    assert small.rows is not None and small.counts.deletes == 1
    small.apply(changes.batch(("u", "k3", 3)), changes.props())
    summary = small.table.current_snapshot().summary.additional_properties
    assert [e.data_file.content for e in live_files(small.table)] == [0]
    assert summary["total-delete-files"] == "0" and summary["total-data-files"] == "1"
    assert levels(small.table) == changes.state


def test_the_writer_expires_old_snapshots_but_keeps_where_it_resumes(members):
    s, name = members
    changes, writer = Changes(), writer_for(*members, fold_files=3)
    with writer.table.transaction() as tx:
        tx.set_properties({"history.expire.max-snapshot-age-ms": "1"})  # everything old at once
    writer.reload()
    writer.apply(changes.batch(*(("r", f"k{i}", 0) for i in range(100))), changes.props())
    for n in range(20):
        writer.apply(changes.batch(("u", f"k{n}", n + 1)), changes.props())
    table = writer.catalog.load_table(name)
    assert len(table.snapshots()) <= MaintenanceSettings().retain_last_snapshots + 4  # 20+ commits, trimmed at each fold
    assert committed_position(table).offsets == {"t": {0: changes.position}}  # the resume point survived
    assert levels(table) == changes.state


def test_a_fold_writes_each_file_sorted_by_key_in_small_row_groups(members):
    """A point query then reads one row group of each file, whatever key range the file spans."""
    s, name = members
    changes, writer = Changes(), writer_for(*members, fold_files=3)
    with writer.table.transaction() as tx:
        tx.set_properties({"write.parquet.row-group-limit": "100"})
    writer.reload()
    keys = [f"k{i:04d}" for i in random.Random(5).sample(range(1000), 1000)]  # arrive in no order
    for n in range(0, 1000, 334):
        writer.apply(changes.batch(*(("r", k, 0) for k in keys[n:n + 334])), changes.props())
    table = writer.catalog.load_table(name)
    files = [e.data_file for e in live_files(table) if e.data_file.content == DataFileContent.DATA]
    assert len(files) == 1 and files[0].record_count == 1000  # the three batches, folded into one file
    with table.io.new_input(files[0].file_path).open() as stream:
        parquet = pq.ParquetFile(stream)
        written = parquet.read(columns=["userid"]).column(0).to_pylist()
        groups = parquet.metadata.num_row_groups
    assert written == sorted(keys) and groups == 10
    writer.apply(changes.batch(("u", keys[0], 7), ("d", keys[1], None)), changes.props())
    assert levels(table.refresh()) == changes.state  # the index followed the rows to their sorted places


def test_batches_commit_while_a_fold_is_written_and_the_rows_they_change_do_not_come_back(members, spark):
    """The fold starts after batch 3 and commits after a later one; the batches between it update, delete and
    re-insert rows of the files it rewrites: those rows are stale in its files and deleted in its commit."""
    s, name = members
    changes, writer = Changes(), writer_for(*members, fold_files=3, background_folds=True)
    writer.apply(changes.batch(*(("r", f"k{i}", 0) for i in range(3000))), changes.props())
    writer.apply(changes.batch(*(("u", f"k{i}", 1) for i in range(0, 3000, 20))), changes.props())
    writer.apply(changes.batch(*(("d", f"k{i}", None) for i in range(5, 3000, 20))), changes.props())
    assert writer._folding is not None  # due after three batches: being written now
    plan = writer._folding[0]
    writer.apply(changes.batch(("u", "k0", 7), ("d", "k1", None), ("d", "k20", None), ("c", "k20", 8),
                               ("c", "k5", 9), ("u", "k2999", 6)), changes.props())
    writer.wait_for_fold()
    writer.apply(changes.batch(("u", "k3", 4)), changes.props())
    table = writer.catalog.load_table(name)
    folds = [snap for snap in table.snapshots() if snap.summary and snap.summary.operation.value == "replace"]
    assert len(folds) == 1 and plan.rewrite  # one fold, which rewrote files
    assert levels(table) == changes.state
    assert sorted((r.userid, r.member_level) for r in spark.sql(f"SELECT userid, member_level FROM {name}").collect()) \
        == sorted(changes.state.items())
    restarted = writer_for(*members)  # the index read from the files agrees with the one kept through the fold
    assert len(restarted.index) == len(changes.state)
    restarted.apply(changes.batch(("u", "k0", 1)), changes.props())
    assert levels(restarted.table) == changes.state
