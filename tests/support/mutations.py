"""One table's mutations as a publisher writes them, and a key materializer to run them through."""

from __future__ import annotations

import json
import struct
import uuid
from typing import Any

from materializer.key_materializer import KeyMaterializer, RawRecord
from materializer.output.event_settings import EventSettings
from shared.schema import TableSchema, table_from_json

from support import rowupdate_reference

# CREATE TABLE ks.t (p int, c int, s text STATIC, v text, PRIMARY KEY (p, c))
TABLE = table_from_json({
    "keyspace": "ks", "table": "t", "id": str(uuid.UUID(int=7)), "gc_grace_seconds": 3600,
    "columns": [
        {"name": "p", "kind": "partition_key", "position": 0, "type": "int"},
        {"name": "c", "kind": "clustering", "position": 0, "type": "int",
         "clustering_order": "asc"},
        {"name": "s", "kind": "static", "position": -1, "type": "text"},
        {"name": "v", "kind": "regular", "position": -1, "type": "text"},
    ]}, {})
NOW_MS = 1_800_000_000_000
HOSTS = ("10.0.0.1", "10.0.0.2", "10.0.0.3")


class Registry:
    """The one schema, by hash."""

    def get(self, schema_hash: str) -> TableSchema:
        assert schema_hash == TABLE.schema_hash
        return TABLE


def i32(v: int) -> bytes:
    return struct.pack(">i", v)


def body(kind: str, c: int | None = None, ts: int = 1000, s: str | None = None,
         v: str | None = None, insert: bool = False, deleted_at: int | None = None
         ) -> dict[str, Any]:
    """One record's content: a static row (s), a row (c, v), or a deletion (deleted_at)."""
    cells = [(n, x) for n, x in (("s", s), ("v", v)) if x is not None]
    return {
        "kind": kind, "clustering": [] if c is None else [i32(c)], "shadowable": False,
        "range": None,
        "deletion": None if deleted_at is None else {
            "marked_for_delete_at": deleted_at, "local_deletion_time": NOW_MS // 1000},
        "liveness": {"timestamp": ts, "ttl": 0, "local_expiration_time": None}
        if insert else None,
        "cells": [{"column": n, "path": None, "value": x.encode(), "timestamp": ts, "ttl": 0,
                   "local_deletion_time": None, "tombstone": False} for n, x in cells],
        "complex_deletions": []}


def mutation(position: int, *bodies: dict[str, Any], host: str = HOSTS[0],
             p: int = 2) -> list[bytes]:
    """The raw records the publisher on `host` writes for one mutation of partition `p`."""
    return rowupdate_reference.encode_update([b | {
        "table_id": TABLE.id.bytes, "keyspace": "ks", "table": "t",
        "schema_hash": TABLE.schema_hash, "partition_key": i32(p),
        "source": {"host": host, "datacenter": "dc1", "file": "CommitLog-7-5.log",
                   "segment_id": 5, "position": position, "index": i,
                   "commitlog_version": 7, "messaging_version": 12}}
        for i, b in enumerate(bodies)])


def run(h: KeyMaterializer, values: list[bytes], state: bytes | None = None
        ) -> tuple[list[tuple[dict, str, dict | None, dict | None]], bytes | None]:
    """One micro-batch of partition 2: (key, op, before, after) per event, and the state."""
    res = h.handle("p.raw", i32(2), [RawRecord(v, 0, i) for i, v in enumerate(values)],
                   state, None, NOW_MS)
    events = []
    for _, key, value in res.outputs:
        assert value is not None  # tombstones are off
        doc = json.loads(value)
        events.append((json.loads(key), doc["op"], doc["before"], doc["after"]))
    return events, res.state


def handler() -> KeyMaterializer:
    return KeyMaterializer(Registry(), EventSettings(tombstones=False), "p")


def row(c: int | None, s: str | None = None, v: str | None = None) -> dict[str, Any]:
    return {"p": 2, "c": c, "s": s, "v": v}


def key(c: int | None) -> dict[str, Any]:
    return {"p": 2, "c": c}
