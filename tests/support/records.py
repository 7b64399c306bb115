"""Materializer records of one small table (k, c, s, a, b): by hand and as strategies."""

from __future__ import annotations

import struct
from typing import Any

from hypothesis import strategies as st

from materializer.rules.clustering import ClusteringOrder
from materializer.rules.merge import Merger
from materializer.rules.model import PartitionState
from shared.schema import table_from_json

from support import rowupdate_reference

TABLE = table_from_json({
    "keyspace": "ks", "table": "t", "id": "5a1c0e2e-0000-4000-8000-000000000001",
    "columns": [
        {"name": "k", "kind": "partition_key", "position": 0, "type": "int"},
        {"name": "c", "kind": "clustering", "position": 0, "type": "int",
         "clustering_order": "asc"},
        {"name": "s", "kind": "static", "position": -1, "type": "int"},
        {"name": "a", "kind": "regular", "position": -1, "type": "int"},
        {"name": "b", "kind": "regular", "position": -1, "type": "set<int>"},
    ]}, {})
ORDER = ClusteringOrder(TABLE)
NOW = 1_000_000


def i32(v: int) -> bytes:
    return struct.pack(">i", v)


def record(kind: str = "ROW", clustering: tuple = (), **kw: Any) -> dict[str, Any]:
    base = {"kind": kind, "clustering": list(clustering), "deletion": None, "range": None,
            "liveness": None, "cells": [], "complex_deletions": [], "shadowable": False}
    return base | kw


def cell(column: str, ts: int, value: bytes | None = None, path: bytes | None = None,
         ttl: int = 0, ldt: int | None = None, tombstone: bool = False) -> dict[str, Any]:
    return {"column": column, "path": path, "value": value, "timestamp": ts, "ttl": ttl,
            "local_deletion_time": ldt, "tombstone": tombstone}


def fold(records: list[dict[str, Any]]) -> PartitionState:
    """The partition state of TABLE that `records` merge into, in their order."""
    state = PartitionState()
    merger = Merger(ORDER)
    for r in records:
        merger.apply(state, r)
    return state


# ---- strategies -------------------------------------------------------------------------
ts_st = st.integers(1, 12)
ck_st = st.integers(0, 4).map(lambda v: (i32(v),))


@st.composite
def cells_st(draw: Any) -> list[dict[str, Any]]:
    out = []
    for column in draw(st.lists(st.sampled_from(["a", "b"]), max_size=2, unique=True)):
        ts = draw(ts_st)
        path = i32(draw(st.integers(0, 2))) if column == "b" else None
        value = b"" if column == "b" else i32(draw(st.integers(0, 3)))
        how = draw(st.sampled_from(["live", "live", "ttl", "tombstone"]))
        if how == "tombstone":
            out.append(cell(column, ts, None, path, 0, NOW - 5, True))
        elif how == "ttl":
            out.append(cell(column, ts, value, path, 10, NOW + draw(st.integers(-3, 3))))
        else:
            out.append(cell(column, ts, value, path))
    return out


@st.composite
def record_st(draw: Any) -> dict[str, Any]:
    kind = draw(st.sampled_from(["ROW"] * 6 + ["STATIC_ROW", "PARTITION_DELETION",
                                              "RANGE_TOMBSTONE"]))
    if kind == "PARTITION_DELETION":
        return record(kind, deletion={"marked_for_delete_at": draw(ts_st),
                                      "local_deletion_time": NOW - 1})
    if kind == "RANGE_TOMBSTONE":
        lo, hi = sorted(draw(st.lists(st.integers(0, 4), min_size=2, max_size=2)))
        return record(kind, deletion={"marked_for_delete_at": draw(ts_st),
                                      "local_deletion_time": NOW - 1},
                      range={"start": [i32(lo)], "start_inclusive": draw(st.booleans()),
                             "end": [i32(hi)], "end_inclusive": draw(st.booleans())})
    if kind == "STATIC_ROW":
        return record(kind, cells=[cell("s", draw(ts_st), i32(draw(st.integers(0, 3))))])
    rec = record(kind, draw(ck_st), cells=draw(cells_st()))
    if draw(st.booleans()):
        rec["liveness"] = {"timestamp": draw(ts_st), "ttl": 0, "local_expiration_time": None}
    if draw(st.integers(0, 5)) == 0:
        rec["deletion"] = {"marked_for_delete_at": draw(ts_st), "local_deletion_time": NOW}
    if draw(st.integers(0, 5)) == 0:
        rec["complex_deletions"] = [{"column": "b", "marked_for_delete_at": draw(ts_st),
                                     "local_deletion_time": NOW}]
    return rec


# what a publisher adds to a record of partition 2 of TABLE
PUBLISHED = {"table_id": TABLE.id.bytes, "keyspace": "ks", "table": "t",
             "schema_hash": TABLE.schema_hash, "partition_key": i32(2)}


def published(records: list[dict[str, Any]]) -> list[tuple[dict[str, Any], bytes]]:
    """Each record with the raw value its publisher writes: records that share a source
    (host, segment, position) are one mutation, encoded together so they share its id; a
    record without a source stands alone (its bytes then only break ties)."""
    groups: dict[tuple, list[int]] = {}
    for i, rec in enumerate(records):
        src = rec.get("source")
        key = (src["host"], src["segment_id"], src["position"]) if src else ("alone", i)
        groups.setdefault(key, []).append(i)
    raws: list[bytes] = [b""] * len(records)
    for key, members in groups.items():
        if key[0] == "alone":
            raws[members[0]] = repr(records[members[0]]).encode()
            continue
        members.sort(key=lambda i: records[i]["source"]["index"])  # in split order
        encoded = rowupdate_reference.encode_update([records[i] | PUBLISHED for i in members])
        for i, raw in zip(members, encoded, strict=True):
            raws[i] = raw
    return list(zip(records, raws, strict=True))
