"""CQL type strings → decoding facts, and raw values → Python through the shared codec."""

from __future__ import annotations

import uuid

import pytest

from shared import codec
from shared.cqltype import CqlTypeError, parse_cql_type
from shared.schema import catalog_from_json

UDTS = {"address": (("street", "text"), ("zip", "frozen<list<int>>"))}


@pytest.mark.parametrize(("text", "fixed", "multicell", "cql"), [
    ("int", 4, False, "int"), ("varchar", -1, False, "text"), ("timeuuid", 16, False, "timeuuid"),
    ("smallint", -1, False, "smallint"), ("date", -1, False, "date"),
    ("list<int>", -1, True, "list<int>"), ("frozen<list<int>>", -1, False, "frozen<list<int>>"),
    ("map<text, frozen<set<int>>>", -1, True, "map<text, frozen<set<int>>>"),
    ("vector<float, 3>", 12, False, "vector<float, 3>"),
    ("vector<text, 2>", -1, False, "vector<text, 2>"),
    ("tuple<int, text>", -1, False, "tuple<int, text>"),
    ("address", -1, True, "address"), ("frozen<address>", -1, False, "frozen<address>"),
    ("'org.apache.cassandra.db.marshal.BytesType'", -1, False, "blob"),
    ("'org.apache.cassandra.db.marshal.DateType'", 8, False, "timestamp"),
])
def test_parse(text: str, fixed: int, multicell: bool, cql: str) -> None:
    t = parse_cql_type(text, "ks", UDTS)
    assert (t.fixed_length, t.is_multicell, t.cql()) == (fixed, multicell, cql)


@pytest.mark.parametrize("text", ["map<int>", "list<int", "nosuchtype", "vector<int, x>",
                                  "'com.example.MyType'", "frozen<>"])
def test_parse_errors(text: str) -> None:
    with pytest.raises(CqlTypeError):
        parse_cql_type(text, "ks", UDTS)


def test_unsupported_column_type_does_not_hide_the_table() -> None:
    tables = catalog_from_json({"format": 1, "tables": [{
        "keyspace": "ks", "table": "t", "id": str(uuid.UUID(int=1)),
        "columns": [{"name": "k", "kind": "partition_key", "position": 0, "type": "int"},
                    {"name": "x", "kind": "regular", "position": -1,
                     "type": "'com.example.Custom'"}]}]})
    table = tables[uuid.UUID(int=1)]
    assert table.column("x").type.name == "unsupported"
    assert table.column("k").type.name == "int"


def test_decode_values() -> None:
    t = parse_cql_type("frozen<map<text, frozen<list<int>>>>")
    raw = bytes.fromhex("00000001" "00000001" "78" "00000010" "00000001" "00000004" "00000007")
    assert dict(codec.decode_value(t, raw)) == {"x": [7]}
    assert codec.decode_value(parse_cql_type("int"), b"") is None  # empty value
    assert codec.decode_value(parse_cql_type("text"), b"") == ""
    ts = parse_cql_type("timestamp")
    assert codec.decode_value(ts, (2**63 - 1).to_bytes(8, "big")) == 2**63 - 1  # beyond datetime


def test_counter_context() -> None:
    cid = uuid.UUID(int=7)
    context = (b"\x00\x01" + (0 - 32768).to_bytes(2, "big", signed=True) + cid.bytes
               + (5).to_bytes(8, "big") + (-3).to_bytes(8, "big", signed=True))
    assert codec.counter_shards(context) == [
        {"counter_id": str(cid), "clock": 5, "count": -3, "kind": "global"}]
    assert codec.counter_total(context) == -3


def test_composite_partition_key() -> None:
    tables = catalog_from_json({"format": 1, "tables": [{
        "keyspace": "ks", "table": "t", "id": str(uuid.UUID(int=2)),
        "columns": [{"name": "a", "kind": "partition_key", "position": 0, "type": "text"},
                    {"name": "b", "kind": "partition_key", "position": 1, "type": "int"}]}]})
    key = b"\x00\x02p1\x00" + b"\x00\x04\x00\x00\x00\x01\x00"
    assert codec.decode_partition_key(tables[uuid.UUID(int=2)], key) == {"a": "p1", "b": 1}
    with pytest.raises(ValueError, match="components"):
        codec.decode_partition_key(tables[uuid.UUID(int=2)], b"\x00\x02p1\x00")
