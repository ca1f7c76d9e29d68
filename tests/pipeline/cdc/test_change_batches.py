"""A batch decoded at once in Arrow's JSON reader gives exactly the changes decoded record by record.

``parse_changes`` takes the batch path first and falls back to the record path on anything
unusual; these properties hold that the two never disagree: on the capture's own envelopes
(any op, text or integer keys, several topics in one batch, awkward text) the batch path
answers and its answer is the record path's; on an envelope broken or laid out otherwise it
either answers the same or steps aside (returns None) so that the record path names the fault.
"""

from __future__ import annotations

import json

import msgspec
import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipeline.capture import envelope as env
from pipeline.cdc.changes import EnvelopeError, _decode_batch, _decode_records, parse_changes
from pipeline.kafka_source.range_reader import RAW_SCHEMA

KEYS = {"cdc.shop.products": "productId", "cdc.shop.user_member": "userid", "cdc.shop.orders": "order_id"}
SOURCE = dict(connector="mariadb", name="cdc.shop", db="shop", server_id=1, ts_ms=1_700_000_000_000, gtid=None)
text = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=12)
scalars = st.one_of(st.none(), text, st.integers(-2**63, 2**63 - 1), st.sampled_from(["1.2345", "2026-11-26T00:00:00.000Z"]))


@st.composite
def changes(draw, topic: str | None = None):
    topic = topic or draw(st.sampled_from(sorted(KEYS)))
    key = KEYS[topic]
    pk = draw(st.integers(-10**12, 10**12)) if key == "order_id" else draw(text.filter(bool))
    image = {key: pk, **draw(st.dictionaries(st.sampled_from(["name", "note", "level", "price", "at"]), scalars))}
    op = draw(st.sampled_from(["c", "u", "d", "r"]))
    record = env.envelope(op, None if op in ("c", "r") else image, None if op == "d" else image,
                          table=topic.rsplit(".", 1)[1], file=f"mariadb-bin.{draw(st.integers(1, 999)):06d}",
                          pos=draw(st.integers(0, 2**40)), row=draw(st.integers(0, 9999)), **SOURCE)
    return topic, env.encode(record)


def _batch(records: list[tuple[str, bytes | None]]) -> pa.RecordBatch:
    n = len(records)
    return pa.RecordBatch.from_pydict(
        {"topic": [t for t, _ in records], "partition": [0] * n, "offset": list(range(n)), "timestamp_ms": [0] * n,
         "key": [None] * n, "value": [v for _, v in records]}, schema=RAW_SCHEMA)


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(st.lists(changes(), min_size=1, max_size=30))
def test_the_batch_path_answers_the_capture_s_envelopes_as_the_record_path_does(records):
    raw = _batch(records)
    fast = _decode_batch(raw, KEYS)
    if fast is None:  # only a batch mixing a text key and an integer key (two topics) may step aside
        assert len({KEYS[t] == "order_id" for t, _ in records}) == 2, records
        return
    assert fast.to_pylist() == _decode_records(raw, KEYS).to_pylist()


def test_a_snapshot_batch_takes_the_batch_path():
    names = ["userid", "name", "note"]
    envelopes = env.SnapshotEnvelopes(names, ("userid",), connector="mariadb", name="cdc.shop", db="shop",
                                      table="user_member", server_id=1, ts_ms=1, file="mariadb-bin.000003", pos=4)
    records = [("cdc.shop.user_member", envelopes.encode((f"u{i}", "n\u00e9 \"q\"", None), i, i == 99)[1])
               for i in range(100)]
    server_built = envelopes.encode_image(["u100"], b'{"userid": "u100", "name": "x", "note": null}', 100, True)
    records.append(("cdc.shop.user_member", server_built[1]))  # the server's JSON_OBJECT: spaces after ':' and ','
    raw = _batch(records)
    fast = _decode_batch(raw, KEYS)
    assert fast is not None
    assert fast.to_pylist() == _decode_records(raw, KEYS).to_pylist()
    assert fast.column("pk").to_pylist()[-1] == "u100"
    assert json.loads(fast.column("envelope").to_pylist()[-1])["after"] == {"userid": "u100", "name": "x", "note": None}


@st.composite
def broken(draw):
    """A capture envelope with one thing wrong or unusual, as bytes."""
    topic, value = draw(changes("cdc.shop.products"))
    record = msgspec.json.decode(value)
    kind = draw(st.sampled_from(["op", "key", "ts", "pos", "layout", "nested", "newline", "null-image", "text"]))
    if kind == "op":
        record["op"] = draw(st.sampled_from(["x", "", None, 1]))
    elif kind == "key":
        image = record["before"] if record["op"] == "d" else record["after"]
        image["productId"] = draw(st.sampled_from([None, True, 1.5, {"a": 1}, [1]]))
    elif kind == "ts":
        record["source"]["ts_ms"] = draw(st.sampled_from([-1, None, "soon", 1.5]))
    elif kind == "pos":
        record["source"]["pos"] = draw(st.sampled_from([-4, None, "4"]))
    elif kind == "layout":  # another field between after and source, or source first
        record = {"before": record["before"], "after": record["after"], "extra": {"x": 1}, **record} \
            if draw(st.booleans()) else {"source": record["source"], **record}
    elif kind == "nested":
        (record["before"] or record["after"])["note"] = {"after": {"x": 1}, "source": {"y": 2}}
    elif kind == "newline":
        return topic, env.encode(record).replace(b',"source":', b',\n"source":')
    elif kind == "null-image":
        record["before" if record["op"] == "d" else "after"] = None
    else:
        return topic, draw(st.sampled_from([b"", b"null", b"[1]", b'{"before":null', b"\xff\xfe"]))
    return topic, env.encode(record)


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(st.lists(changes("cdc.shop.products"), max_size=5), broken(), st.lists(changes("cdc.shop.products"), max_size=5))
def test_an_unusual_record_never_makes_the_batch_path_answer_otherwise(before, odd, after):
    raw = _batch([*before, odd, *after])
    fast = _decode_batch(raw, KEYS)
    try:
        slow = _decode_records(raw, KEYS)
    except EnvelopeError as exc:
        assert fast is None  # the record path names it: the batch path must not have answered
        assert f"@{len(before)}" in str(exc) or "@" in str(exc)
        return
    if fast is not None:
        assert fast.to_pylist() == slow.to_pylist()
    assert parse_changes(raw, KEYS).to_pylist() == slow.to_pylist()


def test_a_first_record_that_is_not_an_object_is_named_not_a_crash():
    """pyarrow 26's JSON reader crashed the process on a first line ``null``: such a batch never reaches it."""
    good = env.encode(env.envelope("c", None, {"productId": "1"}, table="products", file="f", pos=4, row=0, **SOURCE))
    for odd in (b"null", b"1", b'"x"', b"[]", b" null"):
        raw = _batch([("cdc.shop.products", odd), ("cdc.shop.products", good)])
        assert _decode_batch(raw, KEYS) is None
        try:
            parse_changes(raw, KEYS)
        except EnvelopeError as exc:
            assert "cdc.shop.products[0]@0" in str(exc)
        else:
            raise AssertionError(f"{odd!r} parsed")
