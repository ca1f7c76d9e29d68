"""The snapshot's spliced envelopes are the envelopes ``envelope`` builds, byte for byte once decoded."""

from __future__ import annotations

import datetime as dt

import msgspec
import pyarrow as pa

from pipeline.capture import envelope as env
from pipeline.cdc.changes import parse_changes
from pipeline.kafka_source.range_reader import RAW_SCHEMA

SOURCE = dict(connector="mariadb", name="cdc.shop", db="shop", table="user_member", server_id=1, ts_ms=123,
              file="binlog.000001", pos=4)
NAMES = ["userid", "name", "show_params", "memberLevel", "update_time", "photo", "joined"]
VALUES = ("10000001", "m-\u00e9", None, 3, "2026-11-26T00:00:00.000Z", b"\xff\x00", dt.datetime(2026, 1, 2, 3, 4, 5))


def test_a_spliced_snapshot_envelope_decodes_to_the_built_one_and_parses_alike():
    envelopes = env.SnapshotEnvelopes(NAMES, ("userid",), **SOURCE)
    for last in (False, True):
        key, value = envelopes.encode(VALUES, 41, last)
        built = env.envelope("r", None, dict(zip(NAMES, VALUES, strict=True)), gtid=None, row=41,
                             snapshot="last" if last else "true", **SOURCE)
        spliced, expected = msgspec.json.decode(value), msgspec.json.decode(env.encode(built))
        assert abs(spliced.pop("ts_ms") - expected.pop("ts_ms")) < 60_000
        assert spliced == expected
        assert key == env.encode({"userid": "10000001"})
    raw = {"topic": ["cdc.shop.user_member"], "partition": [0], "offset": [0], "key": [key], "value": [value]}
    batch = pa.RecordBatch.from_pydict({n: raw.get(n, [None]) for n in RAW_SCHEMA.names}, schema=RAW_SCHEMA)
    change = parse_changes(batch, {"cdc.shop.user_member": "userid"}).to_pylist()[0]
    assert (change["op"], change["pk"], change["order_key"]) == ("r", "10000001", "binlog.000001:000000000000004:000041")


def test_a_one_column_key_is_the_bytes_a_dict_of_it_encodes_to():
    """Kafka places a record by its key's bytes: the spliced key must be msgspec's, or a row's snapshot record
    and its later changes could land in different partitions."""
    for name, value in (("userid", "10000001"), ("id", 7), ("k\u00e9y \"q\"", "v\u00e9 \"\\\n\u0001"), ("n", None),
                        ("at", dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.timezone.utc))):
        envelopes = env.SnapshotEnvelopes([name, "x"], (name,), **SOURCE)
        key, _ = envelopes.encode_image([value], b'{"x":1}', 0, False)
        assert key == env.encode({name: env.to_json_value(value)})
