"""Property-based bad input (hypothesis): parsers classify everything and never raise out.

- ClickEvent validation: arbitrary bytes and near-valid JSON are either a clean event or
  a dead letter with a known reason, and the dead letter keeps the exact raw bytes; the
  fast path (msgspec) and the plain-Python parser give every input the same answer;
- CDC envelopes: anything the apply job cannot interpret stops it with EnvelopeError
  naming the record (topic[partition]@offset), never another exception and never a row.
"""

from __future__ import annotations

import json
import random
import time

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loadgen.events import click_event
from pipeline.cdc.changes import EnvelopeError, parse_changes
from pipeline.clicks import validate
from pipeline.clicks.evolution import SchemaChangeNeeded, Shape
from pipeline.clicks.validate import Invalid, Limits, classify, parse_batch
from pipeline.kafka_source.range_reader import RAW_SCHEMA

NOW = int(time.time() * 1000)
LIMITS = Limits()
REASONS = {"malformed_json", "oversize", "missing_field", "wrong_type", "out_of_range"}
#: a click table that has evolved: fields of each type, as the policies see them
EVOLVED = (("deviceType", "string"), ("appVersion", "int"), ("score", "float"), ("ratio", "double"),
           ("seen", "boolean"), ("total", "long"))
SHAPES = [Shape(EVOLVED, policy, reserved=frozenset({"name", "event_id"})) for policy in ("evolve", "strict", "ignore")]
EVOLVED_REASONS = REASONS | {"unknown_field", "bad_field_name", "too_many_fields"}
FIELDS = ("eventId", "webpageId", "uid", "productId", "cookieId", "expendTime", "updateTime")

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats(allow_nan=True) | st.text(max_size=40),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=12)


def check_classified(raw: bytes | None) -> None:
    fields, reason = classify(raw, NOW, LIMITS)
    assert (fields is None) != (reason is None)
    if reason is not None:
        assert reason.split(":")[0] in REASONS, reason  # "internal: ..." would be a parser bug
    else:
        assert isinstance(fields["uid"], str) and fields["uid"].strip() == fields["uid"]
        assert isinstance(fields["webpageId"], int) and not isinstance(fields["webpageId"], bool)
        assert NOW - LIMITS.max_age_ms <= fields["updateTime"] <= NOW + LIMITS.max_future_ms


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(st.binary(max_size=400) | st.none())
def test_arbitrary_bytes_are_classified(raw):
    check_classified(raw)


@st.composite
def near_valid_events(draw):
    event = click_event(random.Random(draw(st.integers(0, 10**6))), now_ms=NOW)
    for name in draw(st.lists(st.sampled_from(FIELDS), max_size=3, unique=True)):
        action = draw(st.sampled_from(["drop", "replace", "stringify"]))
        if action == "drop":
            event.pop(name)
        elif action == "replace":
            event[name] = draw(json_values)
        else:
            event[name] = str(event[name])
    if draw(st.booleans()):
        event[draw(st.text(max_size=12))] = draw(json_values)
    for name, _ in EVOLVED:
        if draw(st.integers(0, 3)) == 0:
            event[name] = draw(json_values)
    text = json.dumps(event, allow_nan=True)
    cut = draw(st.integers(0, 3))
    return text[:-cut].encode() if cut else text.encode()  # sometimes truncated mid-object


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(near_valid_events())
def test_near_valid_events_are_classified(raw):
    check_classified(raw)


def python_only(raw: bytes, shape: Shape = validate.IGNORE, proposals=None) -> tuple[dict | None, str | None]:
    try:
        return validate._parse_in_python(raw, NOW, LIMITS, shape, proposals), None
    except Invalid as exc:
        return None, str(exc)


@settings(max_examples=600, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(near_valid_events() | st.binary(max_size=300))
def test_the_fast_path_answers_as_the_python_parser(raw):
    assert classify(raw, NOW, LIMITS) == python_only(raw)


@settings(max_examples=600, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(near_valid_events(), st.sampled_from(SHAPES))
def test_every_policy_classifies_alike_on_both_paths(raw, shape):
    """With evolved columns too: same fields, same reason, same proposals (fields the table would gain)."""
    fast: list = []
    slow: list = []
    assert classify(raw, NOW, LIMITS, shape, fast) == python_only(raw, shape, slow)
    assert fast == slow
    fields, reason = classify(raw, NOW, LIMITS, shape, [])
    assert reason is None or reason.split(":")[0] in EVOLVED_REASONS, reason
    if fast:
        assert shape.policy == "evolve"  # only evolve proposes columns
    if fields is not None:
        assert set(fields) >= {name for name, _ in EVOLVED}
    if fast:  # without a list to take them, proposals stop the batch (a Spark task: the job evolves the table)
        with pytest.raises(SchemaChangeNeeded):
            classify(raw, NOW, LIMITS, shape)


def test_valid_events_take_the_fast_path():
    rng = random.Random(7)
    for shape in (validate.IGNORE, *SHAPES):
        for _ in range(200):
            event = click_event(rng, now_ms=NOW)
            event.update(deviceType="ios", appVersion=7, score=1.5, ratio=0.1, seen=True, total=2**40)
            raw = json.dumps(event if shape.columns else click_event(rng, now_ms=NOW)).encode()
            validate.decoder(shape).decode(raw)  # no fallback for the common case, evolved columns included
            fields, reason = classify(raw, NOW, LIMITS, shape)
            assert reason is None
            if shape.columns:
                assert (fields["deviceType"], fields["appVersion"], fields["ratio"]) == ("ios", 7, 0.1)


@settings(max_examples=50, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(st.lists(st.binary(max_size=200) | near_valid_events(), min_size=1, max_size=20))
def test_dead_letters_keep_the_raw_bytes(values):
    n = len(values)
    raw = pa.RecordBatch.from_pydict(
        {"topic": ["t"] * n, "partition": [0] * n, "offset": list(range(n)), "timestamp_ms": [NOW] * n,
         "key": [None] * n, "value": values}, schema=RAW_SCHEMA)
    parsed = parse_batch(raw, LIMITS, NOW)
    assert parsed.column("value").to_pylist() == values
    errors = parsed.column("error").to_pylist()
    assert all(e is None or e.split(":")[0] in REASONS for e in errors)


def _batch(values: list[bytes | None]) -> pa.RecordBatch:
    n = len(values)
    return pa.RecordBatch.from_pydict(
        {"topic": ["cdc.shop.products"] * n, "partition": [0] * n, "offset": list(range(n)),
         "timestamp_ms": [NOW] * n, "key": [None] * n, "value": values}, schema=RAW_SCHEMA)


def _envelope(op="u", before=None, after=None, source=None) -> dict:
    row = {"productId": "1", "name": "n", "description": "d", "product_price": "1.1000",
           "update_time": "2026-11-21T10:00:00.000Z"}
    return {"op": op, "before": before, "after": row if after is None else after, "ts_ms": NOW,
            "source": source if source is not None else {"table": "products", "ts_ms": NOW, "file": "b.000001",
                                                         "pos": 4, "row": 0, "server_id": 1}}


@st.composite
def broken_envelopes(draw):
    record = _envelope()
    mutation = draw(st.sampled_from(["op", "drop", "replace", "source", "image-key", "not-json"]))
    if mutation == "op":
        record["op"] = draw(json_values.filter(lambda v: v not in ("c", "u", "d", "r")))
    elif mutation == "drop":
        record.pop(draw(st.sampled_from(["op", "source", "after"])))
    elif mutation == "replace":
        record[draw(st.sampled_from(["after", "source"]))] = draw(json_values.filter(lambda v: not isinstance(v, dict)))
    elif mutation == "source":
        record["source"] = {k: v for k, v in record["source"].items() if k != draw(st.sampled_from(["ts_ms", "file"]))}
        record["source"]["ts_ms"] = draw(st.sampled_from([None, "soon", NOW]))
    elif mutation == "image-key":
        record["after"] = {k: v for k, v in record["after"].items() if k != "productId"}
    else:
        return draw(st.binary(max_size=60).filter(lambda b: not b.strip().startswith(b"{")))
    return json.dumps(record).encode()


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(broken_envelopes())
def test_broken_envelopes_stop_with_a_clear_error(value):
    keys = {"cdc.shop.products": "productId"}
    try:
        out = parse_changes(_batch([value]), keys)
    except EnvelopeError as exc:
        assert "cdc.shop.products[0]@0" in str(exc)
        return
    # Whatever parses must be a complete change (a mutation may leave a valid envelope).
    row = out.to_pylist()[0]
    assert row["op"] in ("c", "u", "d", "r") and row["pk"] and isinstance(row["source_ts_ms"], int)


def test_valid_envelopes_parse():
    keys = {"cdc.shop.products": "productId"}
    out = parse_changes(_batch([json.dumps(_envelope()).encode()]), keys).to_pylist()
    assert out[0]["pk"] == "1" and out[0]["op"] == "u"
