"""After-images as the apply reads them (pipeline/cdc/images.py), and the Python apply peer's upsert
(lab/peers/cdc_python_writer.py): newest change per key, typed after-images, and
on the real catalog a batch applied twice leaving the same rows with the offsets of the second."""

from __future__ import annotations

import datetime as dt
import json
import time
from decimal import Decimal

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lab.peers.cdc_python_writer import DimensionWriter
from pipeline.capture import envelope as env
from pipeline.cdc.changes import CHANGE_SCHEMA, parse_changes
from pipeline.cdc.dimension_tables import committed_position, dimensions, ensure_dimension_tables
from pipeline.cdc.images import _decode_images, _read_images, after_fields, after_images, image_struct, newest_per_key
from pipeline.kafka_source import offsets as kafka_offsets
from pipeline.kafka_source.range_reader import RAW_SCHEMA

PRODUCT_COLUMNS = {c: c for c in ("productId", "name", "description", "product_price", "update_time")}


def changes(*rows: tuple[str, str, int, dict | None]) -> pa.Table:
    """(op, key, binlog position, after-image) per change, in arrival order."""
    return pa.Table.from_pylist([
        {"topic": "t", "partition": 0, "offset": i, "tbl": "products", "op": op, "pk": key,
         "order_key": f"binlog.000001:{pos:015d}:000000", "source_ts_ms": 0,
         "envelope": record(op, after)}
        for i, (op, key, pos, after) in enumerate(rows)], schema=CHANGE_SCHEMA)


def record(op: str, after: dict | None) -> str:
    """A change record's text as far as the images read it (a delete's image is its before-image)."""
    return json.dumps({"before": after if op == "d" else None, "after": None if op == "d" else after, "op": op})


def product(key: str, price, **more) -> dict:
    return {"productId": key, "name": f"n{key}", "description": "d", "product_price": price,
            "update_time": "2026-11-25T03:00:00.123Z", **more}


def test_the_newest_change_per_key_wins_by_binlog_position_not_arrival():
    batch = changes(("u", "1", 30, product("1", "3.00")), ("u", "1", 10, product("1", "1.00")),
                    ("d", "2", 20, None), ("c", "2", 5, product("2", "2.00")), ("c", "3", 7, product("3", "7")))
    newest = {r["pk"]: (r["op"], r["order_key"]) for r in newest_per_key(batch).to_pylist()}
    assert newest == {"1": ("u", "binlog.000001:000000000000030:000000"),
                      "2": ("d", "binlog.000001:000000000000020:000000"),
                      "3": ("c", "binlog.000001:000000000000007:000000")}


def test_a_column_added_in_the_middle_of_a_batch_is_among_its_fields_whatever_the_arrival_order():
    batch = changes(("u", "2", 40, product("2", "1.00", email="a@b")), ("u", "1", 10, product("1", "1.00")),
                    ("d", "3", 50, None), ("u", "4", 20, product("4", "2.00")))
    assert after_fields(batch) == {*product("1", "1"), "email"}
    assert after_fields(changes(("d", "3", 50, None))) == set()


def test_after_images_take_the_table_types_and_a_value_that_does_not_fit_reads_null():
    schema = pa.schema([("productId", pa.large_string(), False), ("name", pa.large_string()),
                        ("description", pa.large_string()), ("product_price", pa.decimal128(10, 4)),
                        ("update_time", pa.timestamp("us", tz="UTC")), ("added_by_a_user", pa.int32())])
    batch = changes(("u", "1", 1, product("1", "12.5")), ("u", "2", 2, product("2", "123456789.1")),
                    ("u", "3", 3, product("3", 4, name=17)), ("d", "4", 4, None))
    rows = after_images(batch, PRODUCT_COLUMNS, schema).to_pylist()
    assert [r["productId"] for r in rows] == ["1", "2", "3"]  # the delete has no after-image
    assert rows[0]["product_price"] == Decimal("12.5000")
    assert rows[1]["product_price"] is None  # more digits than DECIMAL(10,4) holds
    assert rows[2]["product_price"] == Decimal("4.0000") and rows[2]["name"] == "17"
    assert rows[0]["update_time"] == dt.datetime(2026, 11, 25, 3, 0, 0, 123000, tzinfo=dt.timezone.utc)
    assert all(r["added_by_a_user"] is None for r in rows)


IMAGE_SCHEMA = pa.schema([("productId", pa.large_string(), False), ("name", pa.large_string()),
                          ("level", pa.int32()), ("big", pa.int64()), ("product_price", pa.decimal128(10, 4)),
                          ("update_time", pa.timestamp("us", tz="UTC")), ("added_by_a_user", pa.int32())])
IMAGE_COLUMNS = {c: c for c in ("productId", "name", "level", "big", "product_price", "update_time")}
_text = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=10)
_images_of_source_types = st.lists(st.fixed_dictionaries({
    "productId": _text.filter(bool), "name": st.one_of(st.none(), _text),
    "level": st.one_of(st.none(), st.integers(-2**31, 2**31 - 1)),
    "big": st.integers(-2**63, 2**63 - 1), "product_price": st.decimals(-999999, 999999, places=4).map(lambda d: f"{d:f}"),
    "update_time": st.datetimes(dt.datetime(1971, 1, 1), dt.datetime(2100, 1, 1)).map(
        lambda d: d.isoformat(timespec="milliseconds") + "Z")}), min_size=1, max_size=20)


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(_images_of_source_types, st.sampled_from([None, {"level": "high"}, {"level": 2**40}, {"name": 5},
                                                 {"product_price": "1.23456"}, {"update_time": "soon"}]))
def test_images_read_in_arrow_equal_the_value_by_value_ones(images, surprise):
    """A chunk of images of the source's own types is read in Arrow; one surprise sends it value by value."""
    if surprise:
        images = [*images[:-1], {**images[-1], **surprise}]
    texts = [record("r", image) for image in images]
    read = _read_images(pa.array(texts, pa.string()), IMAGE_COLUMNS, IMAGE_SCHEMA)
    decoded = _decode_images(texts, IMAGE_COLUMNS, IMAGE_SCHEMA)
    assert (read is None) == bool(surprise)
    assert read is None or read.to_pylist() == decoded.to_pylist()
    if surprise == {"level": 2**40}:
        assert decoded.column("level")[-1].as_py() is None  # does not fit an INT: reads null, not a crash


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(_images_of_source_types, st.sampled_from([None, {"level": "high"}, {"level": 2**40}, {"name": 5},
                                                 {"product_price": "1.23456"}, {"update_time": "soon"}]),
       st.lists(st.sampled_from(["c", "u", "r", "d"]), min_size=20, max_size=20))
def test_images_read_with_the_records_equal_the_ones_read_from_their_text(images, surprise, ops):
    """The apply reads each after-image once, with the records; the rows are the ones read from the text later."""
    if surprise:
        images = [*images[:-1], {**images[-1], **surprise}]
    topic = "cdc.shop.products"
    records = [env.encode(env.envelope(op, image if op == "d" else None, None if op == "d" else image,
                                       table="products", file="b.000001", pos=4 + n, row=0, connector="mariadb",
                                       name="cdc.shop", db="shop", server_id=1, ts_ms=1, gtid=None))
               for n, (op, image) in enumerate(zip(ops, images))]
    raw = pa.RecordBatch.from_pydict({"topic": [topic] * len(records), "partition": [0] * len(records),
                                      "offset": list(range(len(records))), "timestamp_ms": [0] * len(records),
                                      "key": [None] * len(records), "value": records}, schema=RAW_SCHEMA)
    keys = {topic: "productId"}
    with_images = parse_changes(raw, keys, {topic: image_struct(IMAGE_COLUMNS, IMAGE_SCHEMA)})
    from_text = parse_changes(raw, keys)
    assert with_images.select(CHANGE_SCHEMA.names).to_pylist() == from_text.to_pylist()
    other_json_type = surprise in ({"level": "high"}, {"name": 5}) and ops[len(images) - 1] != "d"
    assert ("image" in with_images.schema.names) != other_json_type  # such a batch reads without them
    read_once = after_images(pa.Table.from_batches([with_images]), IMAGE_COLUMNS, IMAGE_SCHEMA)
    assert read_once.to_pylist() == after_images(pa.Table.from_batches([from_text]), IMAGE_COLUMNS,
                                                 IMAGE_SCHEMA).to_pylist()


def test_images_read_before_the_table_gained_a_column_are_read_again_from_the_text():
    topic, image = "cdc.shop.products", product("1", "2.50", email="a@b")
    record = env.encode(env.envelope("u", None, image, table="products", file="b.000001", pos=4, row=0,
                                     connector="mariadb", name="cdc.shop", db="shop", server_id=1, ts_ms=1, gtid=None))
    raw = pa.RecordBatch.from_pydict({"topic": [topic], "partition": [0], "offset": [0], "timestamp_ms": [0],
                                      "key": [None], "value": [record]}, schema=RAW_SCHEMA)
    before = pa.schema([("productId", pa.string(), False), ("name", pa.string()), ("product_price", pa.decimal128(10, 4))])
    columns = {"productId": "productId", "name": "name", "product_price": "product_price"}
    parsed = pa.Table.from_batches([parse_changes(raw, {topic: "productId"}, {topic: image_struct(columns, before)})])
    assert "image" in parsed.schema.names
    wider = before.append(pa.field("email", pa.string()))
    rows = after_images(parsed, {**columns, "email": "email"}, wider).to_pylist()
    assert rows == [{"productId": "1", "name": "n1", "product_price": Decimal("2.5000"), "email": "a@b"}]


@pytest.mark.stack
@pytest.mark.parametrize("whole_table_rows", [50_000, 0], ids=["replace-the-table", "merge-on-read"])
def test_a_batch_applied_twice_leaves_the_same_rows(settings, whole_table_rows):
    from lakehouse.catalog import pyiceberg_catalog

    s = settings.model_copy(deep=True)
    stamp = int(time.time() * 1000)
    s.catalog.products_table, s.catalog.members_table = f"ods_test.products_{stamp}", f"ods_test.members_{stamp}"
    ensure_dimension_tables(s)
    table = dimensions(s)["products"].table
    writer = DimensionWriter(pyiceberg_catalog(s), table, "productId", PRODUCT_COLUMNS, whole_table_rows)
    writer.apply(changes(("c", "1", 1, product("1", "1")), ("c", "2", 2, product("2", "2"))),
                 kafka_offsets.commit_properties({"t": {0: 2}}, {}))
    batch = changes(("u", "1", 3, product("1", "9")), ("d", "2", 4, None), ("c", "3", 5, product("3", "3")))
    for end in (5, 5):  # a replay after a crash between the commit and the next plan
        writer.apply(batch, kafka_offsets.commit_properties({"t": {0: end}}, {}))
    rows = sorted((r["productId"], r["product_price"]) for r in writer.table.scan().to_arrow().to_pylist())
    assert rows == [("1", Decimal("9.0000")), ("3", Decimal("3.0000"))]
    assert writer.live_keys == 2
    assert committed_position(writer.table).offsets == {"t": {0: 5}}
    if whole_table_rows:  # each batch replaced the content: one file holds the table
        assert len(list(writer.table.scan().plan_files())) == 1
    fresh = DimensionWriter(pyiceberg_catalog(s), table, "productId", PRODUCT_COLUMNS)  # a restart reads the keys
    assert fresh.live_keys == 2 and fresh.index is not None and len(fresh.index) == 2
    assert (fresh.index.locate(["1", "2", "3"])[0] >= 0).tolist() == [True, False, True]


@pytest.mark.parametrize("whole_table_rows", [50_000, 0], ids=["replace-the-table", "merge-on-read"])
def test_an_integer_key_names_the_same_row_after_a_restart(settings, whole_table_rows):
    """Change envelopes carry a key as text; a table keyed on a BIGINT (a captured ``orders``) reads it back as an
    integer when the writer starts again. Both must name one row, or an update after a restart adds a second."""
    from pyiceberg.schema import Schema
    from pyiceberg.types import LongType, NestedField, StringType

    from lakehouse.catalog import pyiceberg_catalog
    from pipeline.lake_writer.catalog_tables import ensure_table
    from pipeline.tables import COMMON_PROPERTIES, UPSERT_PROPERTIES

    name = f"ods_test.orders_{int(time.time() * 1000)}"
    ensure_table(pyiceberg_catalog(settings), name,
                 Schema(NestedField(1, "order_id", LongType(), required=True), NestedField(2, "note", StringType()),
                        identifier_field_ids=[1]), {**COMMON_PROPERTIES, **UPSERT_PROPERTIES})
    columns = {"order_id": "order_id", "note": "note"}

    def order(op: str, key: int, pos: int, note: str | None) -> tuple:
        return op, str(key), pos, None if note is None else {"order_id": key, "note": note}

    writer = DimensionWriter(pyiceberg_catalog(settings), name, "order_id", columns, whole_table_rows)
    writer.apply(changes(order("c", 7, 1, "first"), order("c", 8, 2, "gone soon")),
                 kafka_offsets.commit_properties({"t": {0: 2}}, {}))
    writer.close()
    restarted = DimensionWriter(pyiceberg_catalog(settings), name, "order_id", columns, whole_table_rows)
    restarted.apply(changes(order("u", 7, 3, "second"), order("d", 8, 4, None)),
                    kafka_offsets.commit_properties({"t": {0: 4}}, {}))
    assert restarted.table.scan().to_arrow().to_pylist() == [{"order_id": 7, "note": "second"}]
    restarted.close()


def test_the_snapshot_reads_timestamps_and_decimals_as_the_stream_writes_them():
    """The snapshot reads TIMESTAMP and DECIMAL as text (fast); the binlog stream converts Python values:
    both must give the apply job the same JSON values."""
    from pipeline.capture import envelope as env

    stamp = dt.datetime(2026, 11, 26, 4, 41, 18, 123456, tzinfo=dt.timezone.utc)
    assert env._timestamp_text("2026-11-26 04:41:18.123456") == env.to_json_value(stamp)
    assert env._timestamp_text("2026-11-26 04:41:18") == env.to_json_value(stamp.replace(microsecond=0))
    assert env.SNAPSHOT_CONVERSIONS[env.FIELD_TYPE.NEWDECIMAL]("8.1000") == env.to_json_value(Decimal("8.1000"))
