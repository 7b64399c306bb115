"""Decimals and varints arrive exact, or not at all: never a nearby number.

Debezium's Cassandra connector sends a decimal as float64 (70 of 811 rows lost precision
through Debezium's JDBC sink) and JsonConverter wraps a varint beyond 64 bits under an int64
schema. Here a decimal is Debezium's VariableScaleDecimal by default, decoded below as
Debezium does (BigInteger of the bytes, then the scale), and such a varint goes to the
dead-letter topic in long mode.
"""

from __future__ import annotations

import base64
import json
import struct
import uuid
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from materializer.key_materializer import KeyMaterializer, RawRecord
from materializer.output.envelope import EnvelopeWriter
from materializer.output.event_settings import EventSettings
from materializer.output.values import ValueModes, to_connect, unscaled_bytes
from shared import codec, rowupdate
from shared.cqltype import parse_cql_type
from shared.schema import TableSchema, table_from_json

DECIMAL = parse_cql_type("decimal", "ks", {})
NOW_MS = 1_800_000_000_000
TABLE = table_from_json({
    "keyspace": "ks", "table": "n", "id": str(uuid.UUID(int=11)),
    "columns": [{"name": "k", "kind": "partition_key", "position": 0, "type": "int"},
                {"name": "d", "kind": "regular", "position": -1, "type": "decimal"},
                {"name": "v", "kind": "regular", "position": -1, "type": "varint"}]}, {})


def debezium_decode(struct_value: dict) -> Decimal:
    """What Debezium's VariableScaleDecimal.toLogical does: BigInteger(value), scale."""
    raw = struct_value["value"]
    raw = base64.b64decode(raw) if isinstance(raw, str) else raw
    # built from text: exact (Decimal arithmetic would round to 28 digits)
    return Decimal(f"{int.from_bytes(raw, 'big', signed=True)}E{-struct_value['scale']}")


def test_unscaled_bytes_are_javas_biginteger_bytes() -> None:
    # BigInteger.valueOf(n).toByteArray() for each n
    assert [unscaled_bytes(n) for n in (0, 1, -1, 127, 128, -128, -129, 255, 65536)] == [
        b"\x00", b"\x01", b"\xff", b"\x7f", b"\x00\x80", b"\x80", b"\xff\x7f", b"\x00\xff",
        b"\x01\x00\x00"]


@given(st.decimals(allow_nan=False, allow_infinity=False, places=None)
       .filter(lambda d: abs(d.as_tuple().exponent) < 10**6))
def test_a_decimal_comes_back_exact_with_its_scale(d: Decimal) -> None:
    got = to_connect(DECIMAL, d)
    assert debezium_decode(got) == d
    assert got["scale"] == -d.as_tuple().exponent  # 1.50 stays 1.50 (scale 2), as Cassandra


def test_the_decimal_that_lost_precision_through_the_jdbc_sink() -> None:
    d = Decimal("12345678901234.56789")
    event = json.loads(_event(d, 1))
    assert debezium_decode(event["after"]["d"]) == d
    assert float(d) != d  # what the double mapping sent


@pytest.mark.parametrize(("mode", "want"), [("string", "0.00000012"), ("double", 1.2e-07)])
def test_decimal_string_and_double_modes(mode: str, want: object) -> None:
    assert to_connect(DECIMAL, Decimal("1.2E-7"), ValueModes(decimal=mode)) == want


def test_the_schema_names_the_struct_for_connect() -> None:
    w = EnvelopeWriter(TABLE, "c", schemas=True)
    doc = json.loads(w.value("c", None, {"k": 1, "d": to_connect(DECIMAL, Decimal("2.5")),
                                         "v": 3}, w.source(1), 0))
    after = {f["field"]: f for f in next(f for f in doc["schema"]["fields"]
                                         if f["field"] == "after")["fields"]}
    assert after["d"]["name"] == "io.debezium.data.VariableScaleDecimal"
    assert debezium_decode(doc["payload"]["after"]["d"]) == Decimal("2.5")


def _event(d: Decimal, v: int, varint_mode: str = "long") -> bytes | None:
    """The JSON event of one insert (None: it went to the dead-letter topic)."""
    class One:
        def get(self, _h: str) -> TableSchema:
            return TABLE

    h = KeyMaterializer(One(), EventSettings(varint_mode=varint_mode,
                                        tombstones=False), "p")
    cells = [{"column": c, "path": None, "value": codec.encode_value(TABLE.column(c).type, x),
              "timestamp": 5, "ttl": 0, "local_deletion_time": None, "tombstone": False}
             for c, x in (("d", d), ("v", v))]
    rec = rowupdate.encode({
        "table_id": TABLE.id.bytes, "keyspace": "ks", "table": "n",
        "schema_hash": TABLE.schema_hash, "partition_key": struct.pack(">i", 1),
        "clustering": [], "kind": "ROW", "deletion": None, "shadowable": False,
        "range": None, "liveness": {"timestamp": 5, "ttl": 0, "local_expiration_time": None},
        "cells": cells, "complex_deletions": [],
        "source": {"host": "h", "datacenter": "dc", "file": "CommitLog-7-1.log",
                   "segment_id": 1, "position": 1, "index": 0, "commitlog_version": 7,
                   "messaging_version": 12}})
    res = h.handle("p.raw.ks.n", struct.pack(">i", 1), [RawRecord(rec, 0, 9)], None, None,
                   NOW_MS)
    (topic, _key, value), = res.outputs
    return None if topic.endswith("dead-letter") else value


def test_a_varint_beyond_64_bits_is_never_written_under_int64() -> None:
    huge = 123456789012345678901234567890
    assert _event(Decimal(1), huge) is None  # to the dead-letter topic, not wrapped
    assert json.loads(_event(Decimal(1), 2**63 - 1))["after"]["v"] == 2**63 - 1
    assert json.loads(_event(Decimal(1), huge, "string"))["after"]["v"] == str(huge)
