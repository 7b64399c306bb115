"""The specialised Avro writer writes fastavro's bytes, and refuses what it cannot write."""

from __future__ import annotations

import io
from typing import Any

import pytest
from fastavro import parse_schema, schemaless_writer
from hypothesis import given, settings
from hypothesis import strategies as st

from materializer.output.avro_writer import compile_writer

ROW = {"type": "record", "name": "ns.Row", "fields": [
    {"name": "i", "type": "int"},
    {"name": "l", "type": ["null", "long"], "default": None},
    {"name": "s", "type": ["null", "string"], "default": None},
    {"name": "b", "type": ["null", "bytes"], "default": None},
    {"name": "f", "type": "float"},
    {"name": "d", "type": ["null", "double"], "default": None},
    {"name": "t", "type": ["null", "boolean"], "default": None},
    {"name": "day", "type": ["null", {"type": "int", "logicalType": "date",
                                      "connect.name": "org.apache.kafka.connect.data.Date"}]},
    {"name": "ms", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "small", "type": {"type": "int", "connect.type": "int16"}},
    {"name": "list", "type": ["null", {"type": "array", "items": ["null", "string"]}]},
    {"name": "map", "type": {"type": "map", "values": "long"}},
    {"name": "pairs", "type": {"type": "array", "items": {
        "type": "record", "name": "ns.Entry", "fields": [
            {"name": "key", "type": "int"}, {"name": "value", "type": ["null", "string"]}]}}},
]}
# the envelope's shape: the row record defined in `before`, referenced by name in `after`
ENVELOPE = {"type": "record", "name": "ns.Envelope", "fields": [
    {"name": "before", "type": ["null", ROW], "default": None},
    {"name": "after", "type": ["null", "ns.Row"], "default": None},
    {"name": "op", "type": "string"}]}

ints = st.integers(-(2**31), 2**31 - 1)
longs = st.integers(-(2**63), 2**63 - 1)
text = st.text(max_size=20)
floats32 = st.floats(width=32, allow_nan=False)
rows = st.fixed_dictionaries({
    "i": ints, "l": st.none() | longs, "s": st.none() | text,
    "b": st.none() | st.binary(max_size=200), "f": floats32,
    "d": st.none() | st.floats(allow_nan=False), "t": st.none() | st.booleans(),
    "day": st.none() | ints, "ms": longs, "small": st.integers(-(2**15), 2**15 - 1),
    "list": st.none() | st.lists(st.none() | text, max_size=70),  # 70: a two-byte count
    "map": st.dictionaries(text, longs, max_size=5),
    "pairs": st.lists(st.fixed_dictionaries({"key": ints, "value": st.none() | text}),
                      max_size=3)})
envelopes = st.fixed_dictionaries({"before": st.none() | rows, "after": st.none() | rows,
                                   "op": st.sampled_from(["c", "u", "d", "r"])})


def _fastavro(schema: Any, datum: Any) -> bytes:
    buf = io.BytesIO()
    schemaless_writer(buf, parse_schema(schema), datum)
    return buf.getvalue()


@settings(max_examples=300, deadline=None)
@given(envelopes)
def test_the_bytes_are_fastavros(datum: dict[str, Any]) -> None:
    assert compile_writer(ENVELOPE)(datum) == _fastavro(ENVELOPE, datum)


def test_the_header_comes_first_and_a_missing_optional_field_is_null() -> None:
    write = compile_writer(ENVELOPE)
    assert write({"op": "d"}, b"HDR") == b"HDR" + _fastavro(ENVELOPE, {"op": "d"})


@pytest.mark.parametrize(("field", "value"), [
    ("l", 2**63), ("l", -(2**63) - 1), ("i", 2**31), ("small", "x"), ("s", 5)])
def test_a_value_that_does_not_fit_names_its_field(field: str, value: Any) -> None:
    row = {"i": 1, "f": 0.5, "ms": 3, "small": 2, "map": {}, "pairs": [], field: value}
    with pytest.raises(ValueError, match=rf"field after: field {field}: "):
        compile_writer(ENVELOPE)({"after": row, "op": "c"})


@pytest.mark.parametrize("schema", [
    {"type": "enum", "name": "E", "symbols": ["A"]},
    ["null", "int", "string"], ["int", "null"],
    {"type": "fixed", "name": "F", "size": 4},
    {"type": "bytes", "logicalType": "decimal", "precision": 5, "scale": 2},
    "ns.Unknown"])
def test_a_schema_outside_the_builders_shapes_is_refused(schema: Any) -> None:
    with pytest.raises(ValueError, match="Avro writer"):
        compile_writer({"type": "record", "name": "R", "fields": [{"name": "x", "type": schema}]})
