"""The rules of ClickEvent schema evolution, and the contract they start from (no services)."""

from __future__ import annotations

import json
import random

import jsonschema
import pytest

from lakehouse.contract import click_contract
from loadgen.events import click_event
from pipeline.clicks.evolution import Change, Shape, decide, fit, value_kind
from pipeline.clicks.validate import PARSED_SCHEMA, Limits, classify

NOW = 1_790_000_000_000


def test_the_generator_keeps_the_contract_and_the_parser_reads_it():
    contract = click_contract()
    validator = jsonschema.Draft202012Validator(contract.schema)
    validator.check_schema(contract.schema)
    rng = random.Random(5)
    for _ in range(500):
        event = click_event(rng, now_ms=NOW)
        validator.validate(event)
        assert classify(json.dumps(event).encode(), NOW, Limits())[1] is None
    # the parser's columns are the contract's fields, in its order
    assert [f.column for f in contract.fields] == PARSED_SCHEMA.names[-len(contract.fields):]
    assert {f.name for f in contract.fields if f.required} == set(contract.schema["required"])


@pytest.mark.parametrize(("value", "kind"), [
    (True, "boolean"), (7, "int"), (-2**31, "int"), (2**31, "long"), (2**63, None), (1.5, "float"),
    (0.1, "double"), (1e300, "double"), ("x", "string"), ({"a": 1}, None), ([1], None), (None, None)])
def test_a_value_has_the_narrowest_kind_that_holds_it_exactly(value, kind):
    assert value_kind(value) == kind


def test_columns_accept_widen_or_refuse():
    assert fit("int", "int") == "ok" and fit("int", "long") == "widen" and fit("int", "float") == "wrong"
    assert fit("float", "double") == "widen" and fit("double", "int") == "ok"
    assert fit("string", "int") == "wrong" and fit("boolean", "int") == "wrong" and fit("long", "string") == "wrong"


def test_a_batch_decides_in_order_and_widens_where_iceberg_can():
    shape = Shape((("appVersion", "int"), ("score", "float")))
    proposals = [("deviceType", "string"), ("appVersion", "long"), ("build", "int"), ("build", "long"),
                 ("score", "double"), ("deviceType", "int")]
    assert decide(shape, proposals) == [
        Change("appVersion", "widened", "long", "int"), Change("score", "widened", "double", "float"),
        Change("deviceType", "added", "string"), Change("build", "added", "long")]
    assert decide(shape, []) == []


def test_names_that_cannot_be_columns_are_refused():
    shape = Shape((("deviceType", "string"),), reserved=frozenset({"name", "event_id", "webpageid"}))
    assert shape.name_problem("appVersion") is None
    assert "case" in shape.name_problem("DeviceType")
    assert "own columns" in shape.name_problem("Name")
    assert "own columns" in shape.name_problem("WEBPAGEID")
    assert "cannot be a column name" in shape.name_problem("device type")
    assert "cannot be a column name" in shape.name_problem("1st")


def test_policies_on_one_event():
    raw = b'{"webpageId":1,"uid":"u","productId":"p","cookieId":"c","expendTime":1,"updateTime":%d,"deviceType":"ios"}' % NOW
    limits = Limits()
    proposals: list = []
    fields, reason = classify(raw, NOW, limits, Shape(policy="evolve"), proposals)
    assert reason is None and proposals == [("deviceType", "string")]
    assert classify(raw, NOW, limits, Shape(policy="strict"))[1].startswith("unknown_field: 'deviceType'")
    fields, reason = classify(raw, NOW, limits, Shape(policy="ignore"))
    assert reason is None and "deviceType" not in fields
    fields, reason = classify(raw, NOW, limits, Shape((("deviceType", "string"),), policy="strict"))
    assert fields["deviceType"] == "ios"  # a column the table already has is filled under every policy
    full = Shape(tuple((f"f{i}", "int") for i in range(3)), max_columns=3)
    assert classify(raw, NOW, limits, full, [])[1].startswith("too_many_fields")


def test_the_docs_show_the_contract_as_it_is():
    from pathlib import Path

    from cli.contract import markdown_table

    page = (Path(__file__).resolve().parents[3] / "docs" / "schema-evolution.md").read_text()
    shown = page.split("<!-- contract-table -->\n", 1)[1].split("\n<!-- /contract-table -->", 1)[0]
    assert shown == markdown_table(), "regenerate the table with `lakehouse contract show --markdown`"
