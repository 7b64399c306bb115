"""Avro events: the same events as JSON, in valid Avro, with headers consumers can resolve."""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import io
import ipaddress
import json
import struct
import uuid
from typing import Any

import pytest
from cassandra.util import Duration
from fastavro import parse_schema, schemaless_writer

from materializer.key_materializer import KeyMaterializer, RawRecord
from materializer.output.avro_envelope import decode
from materializer.output.avro_schema import avro_name, to_avro_schema, value_converter
from materializer.output.avro_wire import SINGLE_OBJECT_MAGIC, schema_fingerprint
from materializer.output.event_settings import EventSettings
from shared import codec, rowupdate
from shared.schema import TableSchema, table_from_json

from support import rowupdate_reference

FROZEN = [  # (column, CQL type, driver value)
    ("ti", "tinyint", -7), ("si", "smallint", 300), ("bi", "bigint", -2**40),
    ("vi", "varint", 12345678901), ("fl", "float", 1.5), ("db", "double", -2.25),
    ("de", "decimal", decimal.Decimal("3.125")), ("bo", "boolean", True),
    ("tx", "text", "héllo"), ("asc", "ascii", "plain"), ("bl", "blob", b"\x00\xff"),
    ("uu", "uuid", uuid.UUID(int=5)), ("tu", "timeuuid", uuid.uuid1(node=1, clock_seq=2)),
    ("ip", "inet", ipaddress.ip_address("10.1.2.3").exploded),
    ("da", "date", dt.date(2024, 2, 29)), ("tm", "time", 3_600_000_000_123),
    ("ts", "timestamp", dt.datetime(2025, 1, 2, 3, 4, 5, 6000)),
    ("du", "duration", Duration(1, 2, 3)), ("li", "frozen<list<int>>", [3, 1, 2]),
    ("st", "frozen<set<text>>", {"b", "a"}), ("mi", "frozen<map<int, text>>", {2: "x", 1: "y"}),
    ("tp", "frozen<tuple<int, text>>", (4, "four")),
]
TABLE = table_from_json({
    "keyspace": "ks", "table": "all-types", "id": str(uuid.UUID(int=9)),
    "columns": [{"name": "k", "kind": "partition_key", "position": 0, "type": "int"},
                {"name": "c", "kind": "clustering", "position": 0, "type": "text",
                 "clustering_order": "asc"},
                {"name": "m", "kind": "regular", "position": -1, "type": "map<int, text>"}]
    + [{"name": n, "kind": "regular", "position": -1, "type": t} for n, t, _ in FROZEN]}, {})
NOW_MS = 1_800_000_000_000


class Schemas:
    def get(self, schema_hash: str) -> TableSchema:
        assert schema_hash == TABLE.schema_hash
        return TABLE


class RecordingPublisher:
    """SchemaTopic's header without the Kafka write: the schemas are kept here instead."""

    def __init__(self) -> None:
        self.schemas: dict[bytes, Any] = {}
        self.subjects: list[str] = []

    def header(self, subject: str, schema: Any) -> bytes:
        header = SINGLE_OBJECT_MAGIC + schema_fingerprint(schema)
        self.schemas[header] = schema
        self.subjects.append(subject)
        return header


def _insert(ts: int, position: int, text: str = "héllo") -> bytes:
    by_name = {c.name: c for c in TABLE.columns}
    cells = [{"column": n, "path": None,
              "value": codec.encode_value(by_name[n].type, text if n == "tx" else v),
              "timestamp": ts, "ttl": 0, "local_deletion_time": None, "tombstone": False}
             for n, _t, v in FROZEN]
    cells += [{"column": "m", "path": struct.pack(">i", k), "value": v.encode(),
               "timestamp": ts, "ttl": 0, "local_deletion_time": None, "tombstone": False}
              for k, v in ((7, "seven"), (-1, "minus"))]
    return rowupdate.encode({
        "table_id": TABLE.id.bytes, "keyspace": "ks", "table": "all-types",
        "schema_hash": TABLE.schema_hash, "partition_key": struct.pack(">i", 1),
        "clustering": [b"row"], "kind": "ROW", "deletion": None, "shadowable": False,
        "range": None, "liveness": {"timestamp": ts, "ttl": 0, "local_expiration_time": None},
        "cells": cells, "complex_deletions": [],
        "source": {"host": "h", "datacenter": "dc", "file": "CommitLog-7-1.log",
                   "segment_id": 1, "position": position, "index": 0,
                   "commitlog_version": 7, "messaging_version": 12}})


def _delete(ts: int, position: int) -> bytes:
    rec = rowupdate_reference.decode(_insert(ts, position))
    rec.update(cells=[], liveness=None,
               deletion={"marked_for_delete_at": ts, "local_deletion_time": NOW_MS // 1000})
    return rowupdate.encode(rec)


def _events(fmt: str, publisher: RecordingPublisher | None) -> list[tuple[str, bytes, Any]]:
    h = KeyMaterializer(Schemas(), EventSettings(format=fmt), "p", schema_publisher=publisher)
    out, state = [], None
    for batch in ([_insert(1000, 10)], [_insert(2000, 20, "changed")], [_delete(3000, 30)]):
        res = h.handle("p.raw.ks.all-types", struct.pack(">i", 1),
                       [RawRecord(v, 0, i) for i, v in enumerate(batch)], state, None, NOW_MS)
        out += res.outputs
        state = res.state
    return out


def _json_as_avro(doc: Any, schema: dict[str, Any]) -> Any:
    """A JsonConverter payload in the form the Avro reader returns (bytes, map entries)."""
    if doc is None:
        return None
    t, name = schema["type"], schema.get("name")
    if t == "bytes":
        return base64.b64decode(doc)
    if name == "org.apache.kafka.connect.data.Date":  # Avro `date`: read back as a date
        return dt.date(1970, 1, 1) + dt.timedelta(days=doc)
    if name == "org.apache.kafka.connect.data.Timestamp":  # `timestamp-millis`
        return dt.datetime(1970, 1, 1, tzinfo=dt.UTC) + dt.timedelta(milliseconds=doc)
    if t == "struct":
        return {f["field"]: _json_as_avro(doc.get(f["field"]), f) for f in schema["fields"]}
    if t == "array":
        return [_json_as_avro(x, schema["items"]) for x in doc]
    if t == "map":
        if schema["keys"]["type"] == "string":
            return {k: _json_as_avro(v, schema["values"]) for k, v in doc.items()}
        return [{"key": _json_as_avro(k, schema["keys"]), "value": _json_as_avro(v,
                schema["values"])} for k, v in doc]
    return doc


def test_avro_events_carry_exactly_the_json_events() -> None:
    publisher = RecordingPublisher()
    avro, plain = _events("avro", publisher), _events("json", None)
    assert [(t, v is None) for t, _k, v in avro] == [(t, v is None) for t, _k, v in plain]
    assert [json.loads(v)["op"] for _t, _k, v in plain if v] == ["c", "u", "d"]
    assert sorted(set(publisher.subjects)) == ["p.ks.all-types-key", "p.ks.all-types-value"]
    from materializer.output.envelope import EnvelopeWriter

    writer = EnvelopeWriter(TABLE, "casscade", schemas=False)
    for (_t, ak, av), (_t2, jk, jv) in zip(avro, plain, strict=True):
        assert decode(ak, publisher.schemas) == _json_as_avro(json.loads(jk), writer.key_schema)
        if jv is None:
            assert av is None  # the tombstone stays a null value
            continue
        got = decode(av, publisher.schemas)
        assert got == _json_as_avro(json.loads(jv), writer.value_schema)
    first = decode(avro[0][2], publisher.schemas)["after"]
    assert first["ti"] == -7 and first["fl"] == 1.5 and first["bl"] == b"\x00\xff"
    assert first["m"] == [{"key": -1, "value": "minus"}, {"key": 7, "value": "seven"}]
    assert first["da"] == dt.date(2024, 2, 29)  # the Avro date logical type
    assert first["ts"] == dt.datetime(2025, 1, 2, 3, 4, 5, 6000, tzinfo=dt.UTC)


def test_every_cql_type_is_written_in_fastavros_bytes() -> None:
    """casscade's own Avro writer on the all-types events: fastavro writes the same bytes
    for what fastavro reads back from them."""
    publisher = RecordingPublisher()
    messages = [m for _t, k, v in _events("avro", publisher) for m in (k, v) if m]
    assert len(messages) == 7  # c, u, d: a key and a value each; the tombstone's key
    for message in messages:
        schema = parse_schema(publisher.schemas[message[:10]])
        buf = io.BytesIO()
        schemaless_writer(buf, schema, decode(message, publisher.schemas))
        assert message[10:] == buf.getvalue()


def test_avro_schema_follows_the_connect_mapping() -> None:
    from materializer.output.envelope import EnvelopeWriter

    w = EnvelopeWriter(TABLE, "prod", schemas=False)
    schema = to_avro_schema(w.value_schema, w.value_schema["name"])
    parse_schema(schema)  # valid Avro
    before, after = schema["fields"][0]["type"], schema["fields"][1]["type"]
    assert before[0] == "null" and after == ["null", before[1]["name"]]  # defined once
    assert before[1]["name"] == "prod.ks.all_types.Value"
    row = {f["name"]: f for f in before[1]["fields"]}
    assert row["ti"]["type"] == ["null", {"type": "int", "connect.type": "int8"}]
    assert row["ti"]["default"] is None
    assert row["ts"]["type"][1]["logicalType"] == "timestamp-millis"
    assert row["m"]["type"][1]["items"]["fields"][0]["name"] == "key"
    key = to_avro_schema(w.key_schema, w.key_schema["name"])
    assert [(f["name"], f["type"]) for f in key["fields"]] == [("k", "int"),
                                                              ("c", ["null", "string"])]


@pytest.mark.parametrize(("raw", "valid"), [("ks.table", "ks.table"), ("1x.a-b", "_1x.a_b"),
                                            ("", "_")])
def test_names_are_valid_avro(raw: str, valid: str) -> None:
    assert avro_name(raw) == valid


def _crc64_avro(data: bytes) -> int:
    """CRC-64-AVRO as the Avro specification defines it, written out independently."""
    empty = 0xC15D213AA4D7A795
    table = []
    for i in range(256):
        fp = i
        for _ in range(8):
            fp = (fp >> 1) ^ (empty & -(fp & 1))
        table.append(fp)
    fp = empty
    for b in data:
        fp = (fp >> 8) ^ table[(fp ^ b) & 0xFF]
    return fp


def test_single_object_header_is_the_spec_fingerprint() -> None:
    schema = {"type": "record", "name": "r", "fields": [{"name": "a", "type": "long"}]}
    canonical = b'{"name":"r","type":"record","fields":[{"name":"a","type":"long"}]}'
    assert schema_fingerprint(schema) == _crc64_avro(canonical).to_bytes(8, "little")


def test_value_converter_is_free_without_non_string_map_keys() -> None:
    w_schema = {"type": "struct", "fields": [{"type": "int32", "field": "a", "optional": True}]}
    conv = value_converter(w_schema)
    v = {"a": 1}
    assert conv(v) is v


def test_unknown_format_is_refused() -> None:
    with pytest.raises(ValueError, match=r"events\.format"):
        EventSettings(format="protobuf")


VARINT = table_from_json({
    "keyspace": "ks", "table": "big", "id": str(uuid.UUID(int=10)),
    "columns": [{"name": "k", "kind": "partition_key", "position": 0, "type": "int"},
                {"name": "v", "kind": "regular", "position": -1, "type": "varint"}]}, {})


def _varint_events(fmt: str, mode: str, values: list[int]) -> list[tuple[str, Any, Any]]:
    class One:
        def get(self, _h: str) -> TableSchema:
            return VARINT

    publisher = RecordingPublisher()
    h = KeyMaterializer(One(), EventSettings(format=fmt, varint_mode=mode,
                                         tombstones=False), "p",
                   schema_publisher=publisher)
    out = []
    for k, v in enumerate(values):
        rec = rowupdate.encode({
            "table_id": VARINT.id.bytes, "keyspace": "ks", "table": "big",
            "schema_hash": VARINT.schema_hash, "partition_key": struct.pack(">i", k),
            "clustering": [], "kind": "ROW", "deletion": None, "shadowable": False,
            "range": None, "liveness": {"timestamp": 5, "ttl": 0, "local_expiration_time": None},
            "cells": [{"column": "v", "path": None, "value": codec.encode_value(
                VARINT.columns[1].type, v), "timestamp": 5, "ttl": 0,
                "local_deletion_time": None, "tombstone": False}],
            "complex_deletions": [],
            "source": {"host": "h", "datacenter": "dc", "file": "CommitLog-7-1.log",
                       "segment_id": 1, "position": k, "index": 0, "commitlog_version": 7,
                       "messaging_version": 12}})
        res = h.handle("p.raw.ks.big", struct.pack(">i", k), [RawRecord(rec, 1, 40 + k)], None,
                       None, NOW_MS)
        for topic, key, value in res.outputs:
            if topic.endswith("dead-letter"):
                out.append((topic, json.loads(key), json.loads(value)))
            elif fmt == "avro":
                out.append((topic, decode(key, publisher.schemas),
                            decode(value, publisher.schemas)))
            else:
                out.append((topic, json.loads(key), json.loads(value)))
    return out


def test_varint_beyond_int64_goes_to_the_dead_letter_topic_in_avro_long_mode() -> None:
    huge = -10**30
    events = _varint_events("avro", "long", [7, huge, 8])
    assert [(t, e["after"]["v"]) for t, _k, e in events if t == "p.ks.big"] == [
        ("p.ks.big", 7), ("p.ks.big", 8)]  # the others flow on
    (dead,) = [e for t, _k, e in events if t == "p.materializer.dead-letter"]
    assert (dead["topic"], dead["partition"], dead["offset"]) == ("p.raw.ks.big", 1, 41)
    assert dead["event"]["after"]["v"] == huge and dead["event"]["op"] == "c"  # not lost
    assert "v" in dead["error"]


@pytest.mark.parametrize("fmt", ["json", "avro"])
def test_varint_string_mode_is_exact(fmt: str) -> None:
    events = _varint_events(fmt, "string", [-10**30, 3])
    assert [e["after"]["v"] for _t, _k, e in events] == [str(-10**30), "3"]


def test_avro_events_of_a_captured_table_carry_what_was_published() -> None:
    """The publisher excluded `m` and hashed `tx`: the Avro schema registered for the
    events has no `m`, a string `tx`, and the events decode to the hash."""
    from shared.capture import EXCLUDE, HASH, CaptureSettings, captured_table

    rules = CaptureSettings(column_mask_hash=["ks\\.all-types\\.tx"],
                            column_mask_hash_salt="s").rules()
    captured = captured_table(TABLE, {"m": EXCLUDE, "tx": HASH})

    class Captured:
        def get(self, schema_hash: str) -> TableSchema:
            assert schema_hash == captured.schema_hash
            return captured

    rec = rowupdate_reference.decode(_insert(1000, 10))
    hashed = rules.mask(HASH, "héllo".encode())
    rec["schema_hash"] = captured.schema_hash
    rec["cells"] = [c | {"value": hashed} if c["column"] == "tx" else c
                    for c in rec["cells"] if c["column"] != "m"]
    publisher = RecordingPublisher()
    h = KeyMaterializer(Captured(), EventSettings(format="avro", tombstones=False), "p",
                        schema_publisher=publisher)
    (_topic, _key, value), = h.handle("p.raw.ks.all-types", struct.pack(">i", 1),
                                      [RawRecord(rowupdate.encode(rec), 0, 0)], None, None,
                                      NOW_MS).outputs
    schema = publisher.schemas[value[:10]]
    before = next(f for f in schema["fields"] if f["name"] == "before")  # defines the row
    row = next(t for t in before["type"] if isinstance(t, dict))
    fields = {f["name"]: f["type"] for f in row["fields"]}
    assert "m" not in fields and "string" in fields["tx"]
    assert decode(value, publisher.schemas)["after"]["tx"] == hashed.decode()


def test_a_truncate_event_in_avro_and_json_has_no_key_and_no_images() -> None:
    publisher = RecordingPublisher()
    avro = KeyMaterializer(Schemas(), EventSettings(format="avro"), "p",
                           schema_publisher=publisher)
    plain = KeyMaterializer(Schemas(), EventSettings(), "p")
    table_hash = TABLE.schema_hash
    topic, key, value = avro.truncate_event(table_hash, 1_700_000_000_123_456, 5)
    got = decode(value, publisher.schemas)
    assert (topic, key, got["op"], got["before"], got["after"]) == ("p.ks.all-types", None,
                                                                      "t", None, None)
    assert (got["source"]["file"], got["source"]["ts_us"]) == ("truncate",
                                                               1_700_000_000_123_456)
    _topic, key, value = plain.truncate_event(table_hash, 1_700_000_000_123_456, 5)
    doc = json.loads(value)
    doc = doc.get("payload", doc)
    assert key is None and (doc["op"], doc["before"], doc["after"]) == ("t", None, None)
