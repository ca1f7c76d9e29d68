"""Classification of raw ClickEvents (pure functions, no services)."""

from __future__ import annotations

import json
import random
import time

import pyarrow as pa
import pytest

from loadgen.events import BAD_KINDS, bad_payload, click_event, encode
from pipeline.clicks.validate import Limits, classify, parse_batch
from pipeline.kafka_source.range_reader import RAW_SCHEMA

NOW = int(time.time() * 1000)
LIMITS = Limits()


def test_a_seed_style_event_is_valid_and_cleaned():
    event = click_event(random.Random(1), now_ms=NOW)
    event["productId"] = 7  # ids may arrive as numbers
    event["uid"] = "  513248 "
    fields, error = classify(encode(event), NOW, LIMITS)
    assert error is None
    assert fields["productId"] == "7" and fields["uid"] == "513248"
    assert fields["updateTime"] == NOW and fields["event_id"] == event["eventId"]


@pytest.mark.parametrize("kind", BAD_KINDS)
def test_each_bad_kind_is_dead_lettered_with_its_reason(kind):
    expected = {"event_time": "out_of_range"}.get(kind, kind)
    _, payload = bad_payload(random.Random(2), kind)
    fields, error = classify(payload, int(time.time() * 1000), LIMITS)
    assert fields is None
    assert error.split(":")[0] == expected


@pytest.mark.parametrize("payload, reason", [
    (None, "malformed_json"),
    (b"\xff\xfe", "malformed_json"),
    (b"[1,2]", "malformed_json"),
    (json.dumps({"webpageId": True}).encode(), "out_of_range"),  # updateTime checked first: missing -> missing_field
])
def test_odd_inputs_never_raise(payload, reason):
    fields, error = classify(payload, NOW, LIMITS)
    assert fields is None and error


def test_boolean_is_not_an_integer():
    event = click_event(random.Random(3), now_ms=NOW)
    event["expendTime"] = True
    assert classify(encode(event), NOW, LIMITS)[1] == "wrong_type: expendTime must be an integer, got bool"


def test_parse_batch_keeps_raw_columns_and_marks_errors():
    good = encode(click_event(random.Random(4), now_ms=NOW))
    raw = pa.RecordBatch.from_pydict(
        {"topic": ["t", "t"], "partition": [0, 0], "offset": [5, 6], "timestamp_ms": [NOW, NOW],
         "key": [None, None], "value": [good, b"nope"]}, schema=RAW_SCHEMA)
    out = parse_batch(raw, LIMITS, now_ms=NOW)
    assert out.column("offset").to_pylist() == [5, 6]
    assert out.column("error").to_pylist()[0] is None
    assert out.column("error").to_pylist()[1].startswith("malformed_json")
    assert out.column("value").to_pylist()[1] == b"nope"
