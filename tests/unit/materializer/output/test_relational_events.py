"""The event settings a relational sink needs (deploy/connect/materializer-relational.yaml).

Debezium's JDBC sink has no column type for a Connect struct (tuples failed with a
NullPointerException, UDTs with "Failed to resolve column type"), writes a Connect map as
hstore (failing on random text), and makes every key column NOT NULL, which a static-only
row's null clustering columns cannot fill.
"""

from __future__ import annotations

import json
import struct
import uuid
from decimal import Decimal

import pytest

from materializer.key_materializer import KeyMaterializer, RawRecord
from materializer.output.event_settings import EventSettings
from materializer.output.values import ValueModes, connect_schema, to_connect
from shared import codec, rowupdate
from shared.cqltype import parse_cql_type
from shared.schema import TableSchema, table_from_json

JSON_MODES = ValueModes(structs="json", maps="json")
NOW_MS = 1_800_000_000_000
TABLE = table_from_json({
    "keyspace": "ks", "table": "s", "id": str(uuid.UUID(int=12)),
    "columns": [{"name": "k", "kind": "partition_key", "position": 0, "type": "int"},
                {"name": "c", "kind": "clustering", "position": 0, "type": "int"},
                {"name": "st", "kind": "static", "position": -1, "type": "int"},
                {"name": "v", "kind": "regular", "position": -1, "type": "int"}]}, {})


def test_a_tuple_is_json_text_with_exact_numbers_and_base64_bytes() -> None:
    t = parse_cql_type("tuple<decimal, varint, blob, text>", "ks", {})
    text = to_connect(t, (Decimal("12345678901234.56789"), 2**70, b"\x00\xff", 'a"b'),
                      JSON_MODES)
    assert json.loads(text) == {"field1": "12345678901234.56789", "field2": str(2**70),
                                "field3": "AP8=", "field4": 'a"b'}
    assert connect_schema(t, "x", JSON_MODES)["name"] == "io.debezium.data.Json"


def test_a_udt_and_maps_are_json_text() -> None:
    udt = parse_cql_type("frozen<pt>", "ks", {"pt": [("a", "int"), ("b", "text")]})
    assert json.loads(to_connect(udt, {"a": 1, "b": "x"}, JSON_MODES)) == {"a": 1, "b": "x"}
    by_text = parse_cql_type("map<text, bigint>", "ks", {})
    assert json.loads(to_connect(by_text, {'k"1': 2}, JSON_MODES)) == {'k"1': 2}
    by_int = parse_cql_type("map<int, text>", "ks", {})
    # keys that are not strings: [key, value] pairs, as Connect JSON writes such a map
    assert json.loads(to_connect(by_int, {1: "a", 2: "b"}, JSON_MODES)) == [[1, "a"], [2, "b"]]


def test_structs_stay_named_structs_by_default() -> None:
    t = parse_cql_type("tuple<int, frozen<list<text>>>", "ks", {})
    schema = connect_schema(t)
    assert schema["type"] == "struct"
    assert schema["name"] == "io.casscade.Tuple_int_frozen_list_text"


@pytest.mark.parametrize("bad", [{"structs": "xml"}, {"maps": "hstore"}, {"varint": "int"}])
def test_an_unknown_mode_names_its_setting(bad: dict[str, str]) -> None:
    setting = {"structs": "struct_mode", "maps": "map_mode", "varint": "varint_mode"}
    with pytest.raises(ValueError, match=rf"events\.{setting[next(iter(bad))]} must be"):
        ValueModes(**bad)


def _static_write(static_only_rows: str) -> list[tuple[str, bytes | None, bytes | None]]:
    """The outputs of one static-column write to a partition without rows."""
    class One:
        def get(self, _h: str) -> TableSchema:
            return TABLE

    h = KeyMaterializer(One(), EventSettings(static_only_rows=static_only_rows,
                                        tombstones=False), "p")
    rec = rowupdate.encode({
        "table_id": TABLE.id.bytes, "keyspace": "ks", "table": "s",
        "schema_hash": TABLE.schema_hash, "partition_key": struct.pack(">i", 1),
        "clustering": [], "kind": "STATIC_ROW", "deletion": None, "shadowable": False,
        "range": None, "liveness": None,
        "cells": [{"column": "st", "path": None, "value": codec.encode_value(
            TABLE.column("st").type, 7), "timestamp": 5, "ttl": 0,
            "local_deletion_time": None, "tombstone": False}],
        "complex_deletions": [],
        "source": {"host": "h", "datacenter": "dc", "file": "CommitLog-7-1.log",
                   "segment_id": 1, "position": 1, "index": 0, "commitlog_version": 7,
                   "messaging_version": 12}})
    return h.handle("p.raw.ks.s", struct.pack(">i", 1), [RawRecord(rec, 0, 3)], None, None,
                    NOW_MS).outputs


def test_a_static_only_row_is_an_event_by_default_and_none_when_skipped() -> None:
    (topic, key, value), = _static_write("emit")
    assert topic == "p.ks.s" and json.loads(key) == {"k": 1, "c": None}
    assert json.loads(value)["after"] == {"k": 1, "c": None, "st": 7, "v": None}
    assert _static_write("skip") == []


def test_an_unknown_static_only_mode_is_refused() -> None:
    with pytest.raises(ValueError, match=r"events\.static_only_rows must be one of emit, skip"):
        EventSettings(static_only_rows="drop")
