"""KeyMaterializer end to end without Spark: RowUpdate bytes in, Debezium-style JSON events out."""

from __future__ import annotations

import base64
import json
import struct
import uuid
from typing import Any

import pytest

from materializer.key_materializer import KeyMaterializer, RawRecord
from materializer.output.envelope import EnvelopeWriter
from materializer.output.event_settings import EventSettings
from materializer.output.values import ValueModes, connect_schema
from shared import rowupdate
from shared.cqltype import parse_cql_type
from shared.schema import TableSchema, table_from_json

from support import rowupdate_reference
from support.events import NOW_MS, TABLE, Registry, i32


def raw(kind: str, clustering: list, cells: list, ts: int, position: int,
        liveness: bool = False, deletion: int | None = None) -> bytes:
    return rowupdate.encode({
        "table_id": TABLE.id.bytes, "keyspace": "shop", "table": "orders",
        "schema_hash": TABLE.schema_hash, "partition_key": i32(7), "clustering": clustering,
        "kind": kind, "shadowable": False, "range": None,
        "deletion": None if deletion is None else {"marked_for_delete_at": deletion,
                                                   "local_deletion_time": NOW_MS // 1000},
        "liveness": {"timestamp": ts, "ttl": 0, "local_expiration_time": None}
        if liveness else None,
        "cells": [{"column": c, "path": p, "value": v, "timestamp": ts, "ttl": 0,
                   "local_deletion_time": None, "tombstone": False} for c, p, v in cells],
        "complex_deletions": [],
        "source": {"host": "10.0.0.1", "datacenter": "dc1", "file": "CommitLog-7-5.log",
                   "segment_id": 5, "position": position, "index": 0, "commitlog_version": 7,
                   "messaging_version": 12}})


def run(handler: KeyMaterializer, values: list[bytes], state: bytes | None = None
        ) -> tuple[list[tuple[str, Any, Any]], bytes | None]:
    res = handler.handle("p.raw.shop.orders", i32(7),
                         [RawRecord(v, 2, 100 + i) for i, v in enumerate(values)], state, None,
                         NOW_MS)
    # dead letters keep the raw partition key; events have JSON keys
    out = [(t, k if t.endswith("dead-letter") else json.loads(k), json.loads(v) if v else None)
           for t, k, v in res.outputs]
    return out, res.state


def test_insert_update_delete_give_c_u_d_with_full_rows() -> None:
    h = KeyMaterializer(Registry(TABLE), EventSettings(cluster="prod"), "p")
    ins = raw("ROW", [i32(1)], [("qty", None, i32(2)), ("tags", b"red", b"\x01"),
                                ("at", None, struct.pack(">q", 1_700_000_000_123))],
              1000, 10, liveness=True)
    events, state = run(h, [ins])
    (topic, key, value), = events
    assert topic == "p.shop.orders" and key == {"id": 7, "line": 1}
    assert value["op"] == "c" and value["before"] is None
    assert value["after"] == {"id": 7, "line": 1, "note": None, "qty": 2,
                              "tags": {"red": base64.b64encode(b"\x01").decode()},
                              "at": 1_700_000_000_123}
    src = value["source"]
    assert (src["connector"], src["name"], src["keyspace"], src["table"]) == (
        "casscade", "prod", "shop", "orders")
    assert (src["host"], src["file"], src["pos"], src["ts_us"]) == (
        "10.0.0.1", "CommitLog-7-5.log", 10, 1000)
    assert (src["kafka_topic"], src["kafka_partition"], src["kafka_offset"]) == (
        "p.raw.shop.orders", 2, 100)
    assert value["ts_ms"] == NOW_MS

    upd = raw("STATIC_ROW", [], [("note", None, b"gift")], 2000, 20)
    events, state = run(h, [upd], state)
    (_, _, u), = events
    assert u["op"] == "u" and u["before"]["note"] is None and u["after"]["note"] == "gift"
    assert u["after"]["qty"] == 2  # the rest of the row is still there

    delete = raw("ROW", [i32(1)], [], 3000, 30, deletion=3000)
    events, state = run(h, [delete], state)
    # the static-only row (SELECT shows it once no clustering row is left), the delete,
    # then the tombstone for log compaction
    assert [(e[1], (e[2] or {}).get("op")) for e in events] == [
        ({"id": 7, "line": None}, "c"), ({"id": 7, "line": 1}, "d"), ({"id": 7, "line": 1}, None)]
    assert events[0][2]["after"] == {"id": 7, "line": None, "note": "gift", "qty": None,
                                     "tags": None, "at": None}
    assert events[1][2]["before"]["note"] == "gift" and events[1][2]["after"] is None


def test_replica_copies_and_shadowed_writes_give_no_event() -> None:
    h = KeyMaterializer(Registry(TABLE), EventSettings(tombstones=False), "p")
    ins = raw("ROW", [i32(1)], [("qty", None, i32(2))], 1000, 10, liveness=True)
    events, state = run(h, [ins, ins, ins])
    assert [e[2]["op"] for e in events] == ["c"]
    older = raw("ROW", [i32(1)], [("qty", None, i32(9))], 500, 11)
    assert run(h, [older, ins], state)[0] == []


def test_snapshot_rows_new_to_the_state_are_reads() -> None:
    h = KeyMaterializer(Registry(TABLE), EventSettings(), "p")
    snap = raw("SNAPSHOT_ROW", [i32(3)], [("qty", None, i32(1))], 1000, 0, liveness=True)
    (_, _, value), = run(h, [snap])[0]
    assert value["op"] == "r" and value["source"]["snapshot"] == "true"


def test_bad_records_go_to_the_dead_letter_topic_and_the_rest_flows() -> None:
    h = KeyMaterializer(Registry(TABLE), EventSettings(), "p")
    good = raw("ROW", [i32(1)], [("qty", None, i32(2))], 1000, 10, liveness=True)
    unknown = good.replace(TABLE.schema_hash.encode(), b"0" * 16)
    events, _ = run(h, [b"\x01garbage", good, unknown])
    dead = [e for e in events if e[0] == "p.materializer.dead-letter"]
    assert len(dead) == 2
    assert {(d[2]["topic"], d[2]["partition"], d[2]["offset"]) for d in dead} == {
        ("p.raw.shop.orders", 2, 100), ("p.raw.shop.orders", 2, 102)}
    assert "RecordFormatError" in dead[0][2]["error"]
    assert base64.b64decode(dead[0][2]["value"]) == b"\x01garbage"  # nothing lost
    assert [e[2]["op"] for e in events if e[0] == "p.shop.orders"] == ["c"]


def test_schemas_enabled_envelope_is_jsonconverter_shaped() -> None:
    w = EnvelopeWriter(TABLE, "prod", schemas=True)
    doc = json.loads(w.value("c", None, {"id": 1}, w.source(5), 9))
    assert set(doc) == {"schema", "payload"}
    fields = {f["field"]: f for f in doc["schema"]["fields"]}
    assert set(fields) == {"before", "after", "source", "op", "ts_ms"}
    row = {f["field"]: f for f in fields["after"]["fields"]}
    assert row["tags"] == {"type": "map", "keys": {"type": "string", "optional": True},
                           "values": {"type": "bytes", "optional": True}, "optional": True,
                           "field": "tags"}
    assert row["at"]["name"] == "org.apache.kafka.connect.data.Timestamp"
    key = json.loads(w.key({"id": 1, "line": 2}))
    assert [f["field"] for f in key["schema"]["fields"]] == ["id", "line"]


@pytest.mark.parametrize(("cql", "expected"), [
    ("decimal", {"type": "struct", "name": "io.debezium.data.VariableScaleDecimal",
                 "version": 1, "fields": [{"type": "int32", "optional": False, "field": "scale"},
                                          {"type": "bytes", "optional": False,
                                           "field": "value"}]}),
    ("varint", {"type": "int64"}),
    ("uuid", {"type": "string", "name": "io.debezium.data.Uuid", "version": 1}),
    ("date", {"type": "int32", "name": "org.apache.kafka.connect.data.Date", "version": 1}),
    ("frozen<list<int>>", {"type": "array", "items": {"type": "int32", "optional": True}}),
    ("tuple<int, text>", {"type": "struct", "name": "io.casscade.Tuple_int_text", "fields": [
        {"type": "int32", "optional": True, "field": "field1"},
        {"type": "string", "optional": True, "field": "field2"}]}),
    # a JDBC sink has no column type for a struct: json mode sends it as json text
    ("tuple<int, text>", {"type": "string", "name": "io.debezium.data.Json", "version": 1}),
])
def test_debezium_type_mapping(cql: str, expected: dict) -> None:
    # varint as Debezium's Cassandra connector maps it (long mode; the default is string)
    structs = "json" if expected.get("name") == "io.debezium.data.Json" else "struct"
    modes = ValueModes(varint="long", structs=structs)
    assert connect_schema(parse_cql_type(cql, "ks", {}), modes=modes) == \
        expected | {"optional": True}


def test_dropped_column_cells_vanish_and_do_not_come_back_when_readded() -> None:
    dropped_at = 5000
    base = {"keyspace": "shop", "table": "orders", "id": str(uuid.UUID(int=42)),
            "columns": [c.to_json() for c in TABLE.columns if c.name != "tags"]}
    after_drop = table_from_json(base | {"dropped_columns": [
        {"name": "tags", "kind": "regular", "type": "map<text, blob>",
         "dropped_time": dropped_at}]}, {})
    h_old, h_new = KeyMaterializer(Registry(TABLE), EventSettings(tombstones=False), "p"), None
    only_tags = raw("ROW", [i32(2)], [("tags", b"k", b"\x01")], 1000, 10)  # no liveness
    full = raw("ROW", [i32(1)], [("qty", None, i32(1)), ("tags", b"k", b"\x02")], 1000, 11,
               liveness=True)
    events, state = run(h_old, [only_tags, full])
    assert sorted(e[1]["line"] for e in events) == [1, 2]

    def rewrite(value: bytes, table: TableSchema, ts: int, cells: list) -> bytes:
        rec = rowupdate_reference.decode(value)
        rec["schema_hash"] = table.schema_hash
        rec["cells"] = [{"column": c, "path": p, "value": v, "timestamp": ts, "ttl": 0,
                         "local_deletion_time": None, "tombstone": False} for c, p, v in cells]
        return rowupdate.encode(rec)

    h_new = KeyMaterializer(Registry(TABLE, after_drop), EventSettings(tombstones=False), "p")
    touch = rewrite(full, after_drop, 6000, [("qty", None, i32(3))])
    events, state = run(h_new, [touch], state)
    # row 2 lived only through the dropped column: gone; row 1 just changes qty
    assert [(e[1]["line"], e[2]["op"]) for e in events] == [(2, "d"), (1, "u")]
    assert "tags" not in events[1][2]["after"]
    # a late copy written before the drop changes nothing
    assert run(h_new, [only_tags], state)[0] == []

    readded = table_from_json(base | {"columns": base["columns"] + [
        {"name": "tags", "kind": "regular", "position": -1, "type": "map<text, blob>"}],
        "dropped_columns": [{"name": "tags", "kind": "regular", "type": "map<text, blob>",
                             "dropped_time": dropped_at}]}, {})
    h_re = KeyMaterializer(Registry(TABLE, after_drop, readded), EventSettings(), "p")
    new_tag = rewrite(full, readded, 7000, [("tags", b"n", b"\x03")])
    events, _ = run(h_re, [only_tags, new_tag], state)
    (_, key, value), = events
    assert key == {"id": 7, "line": 1}
    assert value["after"]["tags"] == {"n": base64.b64encode(b"\x03").decode()}  # old k gone


def test_a_late_record_of_an_older_schema_version_does_not_change_the_column_set() -> None:
    base = TABLE.to_json()
    v1 = table_from_json(base | {"altered_at": 100}, {})
    v2 = table_from_json(base | {"altered_at": 200, "columns": base["columns"] + [
        {"name": "extra", "kind": "regular", "position": -1, "type": "text"}]}, {})
    h = KeyMaterializer(Registry(v1, v2), EventSettings(tombstones=False), "p")

    def as_version(value: bytes, table: TableSchema, cells: list, ts: int) -> bytes:
        rec = rowupdate_reference.decode(value)
        rec["schema_hash"] = table.schema_hash
        rec["cells"] = [{"column": c, "path": None, "value": v, "timestamp": ts, "ttl": 0,
                         "local_deletion_time": None, "tombstone": False} for c, v in cells]
        return rowupdate.encode(rec)

    first = raw("ROW", [i32(1)], [], 1000, 10, liveness=True)
    new = as_version(first, v2, [("extra", b"x"), ("qty", i32(1))], 2000)
    late_old = as_version(first, v1, [("qty", i32(5))], 3000)  # written later, older schema
    # the newer version wins whatever the offsets; the same state either way
    for order in ([new, late_old], [late_old, new]):
        events, _ = run(h, order)
        assert events[-1][2]["after"] == {"id": 7, "line": 1, "note": None, "qty": 5,
                                          "tags": None, "at": None, "extra": "x"}
    # and across batches: the state's version is not downgraded by the late record
    _, state = run(h, [new])
    res = h.handle("p.raw.shop.orders", i32(7), [RawRecord(late_old, 2, 500)], state,
                   v2.schema_hash, NOW_MS)
    assert res.schema_hash == v2.schema_hash
    assert json.loads(res.outputs[0][2])["after"]["extra"] == "x"


def test_event_json_reads_back_as_the_standard_library_would_write_it() -> None:
    """orjson writes the events; what a reader gets is what `json` would have written:
    bytes as base64, non-text map keys as strings, non-ASCII text, floats that round-trip,
    and integers beyond 64 bits (varint) exactly, through the standard library."""
    from materializer.output.envelope import dumps

    doc = {"b": b"\x00\xffbin", "m": {1: "x", 2: None}, "t": "grüße ✓", "f": 0.1,
           "big": 1e300, "neg": -(2**63), "l": [1, (2, 3)], "n": None, "ok": True}
    got = dumps(doc)
    want = json.dumps(doc, default=lambda b: base64.b64encode(b).decode())
    assert json.loads(got) == json.loads(want)
    assert b"gr\xc3\xbc\xc3\x9fe" in got  # UTF-8, not \u escapes
    wide = dumps({"v": 123456789012345678901234567890, "t": "ü"})
    assert wide == '{"v":123456789012345678901234567890,"t":"ü"}'.encode()
    with pytest.raises(TypeError):
        dumps({"x": object()})


def test_a_column_the_capture_rules_leave_out_later_leaves_the_events_like_a_drop() -> None:
    """The publishers' capture rules changed to exclude `at` (and mask `note`): a schema
    version of its own, which later events follow like an ALTER TABLE (JSON and Avro)."""
    from shared.capture import CHARS, EXCLUDE, CaptureSettings, captured_table

    captured = captured_table(TABLE, {"at": EXCLUDE, "note": CHARS})
    h = KeyMaterializer(Registry(TABLE, captured), EventSettings(tombstones=False), "p")
    first = raw("ROW", [i32(1)], [("qty", None, i32(1)), ("at", None, (5).to_bytes(8, "big"))],
                1000, 10, liveness=True)
    events, state = run(h, [first])
    assert events[-1][2]["after"]["at"] == 5
    rec = rowupdate_reference.decode(raw("ROW", [i32(1)], [("qty", None, i32(2))], 2000, 11))
    rules = CaptureSettings(column_mask_chars=["shop\\.orders\\.note"]).rules()
    rec["schema_hash"] = captured.schema_hash
    static = rowupdate_reference.decode(
        raw("STATIC_ROW", [], [("note", None, rules.mask(CHARS, b"x"))], 2000, 12))
    static["schema_hash"] = captured.schema_hash
    events, _ = run(h, [rowupdate.encode(rec), rowupdate.encode(static)], state)
    after = events[-1][2]["after"]
    assert "at" not in after and after["qty"] == 2 and after["note"] == "********"
    # the envelope's Connect schema (which the Avro schema is made from) follows it too
    with_schema = KeyMaterializer(Registry(TABLE, captured),
                                  EventSettings(tombstones=False, schemas=True), "p")
    (_t, _k, value), = with_schema.handle("p.raw.shop.orders", i32(7),
                                           [RawRecord(rowupdate.encode(rec), 2, 300)], None,
                                           None, NOW_MS).outputs
    after_schema = next(f for f in json.loads(value)["schema"]["fields"]
                        if f["field"] == "after")
    assert {f["field"]: f["type"] for f in after_schema["fields"]} == {
        "id": "int32", "line": "int32", "note": "string", "qty": "int32",
        "tags": "map"}
