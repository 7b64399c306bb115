"""The shop.orders table, its schema registry and the clock of the key materializer tests."""

from __future__ import annotations

import struct
import uuid

from shared import rowupdate
from shared.schema import TableSchema, table_from_json

TABLE = table_from_json({
    "keyspace": "shop", "table": "orders", "id": str(uuid.UUID(int=42)),
    "gc_grace_seconds": 3600,
    "columns": [
        {"name": "id", "kind": "partition_key", "position": 0, "type": "int"},
        {"name": "line", "kind": "clustering", "position": 0, "type": "int",
         "clustering_order": "asc"},
        {"name": "note", "kind": "static", "position": -1, "type": "text"},
        {"name": "qty", "kind": "regular", "position": -1, "type": "int"},
        {"name": "tags", "kind": "regular", "position": -1, "type": "map<text, blob>"},
        {"name": "at", "kind": "regular", "position": -1, "type": "timestamp"},
    ]}, {})
NOW_MS = 1_800_000_000_000


class Registry:
    """Schemas known by hash (what the schema topic would hold)."""

    def __init__(self, *tables: TableSchema) -> None:
        self.tables = {t.schema_hash: t for t in tables}

    def get(self, schema_hash: str) -> TableSchema:
        return self.tables[schema_hash]


def i32(v: int) -> bytes:
    return struct.pack(">i", v)


def row_of(table: TableSchema, pk: int, qty: int, ts_s: int, line: int = 1,
           kind: str = "ROW", ttl_s: int = 0) -> bytes:
    """The raw value of an INSERT of row (pk, line) of `table` (TABLE's columns) with `qty`,
    written at `ts_s`, with a TTL of `ttl_s` (0: none) (`kind` SNAPSHOT_ROW: that row read
    by a snapshot)."""
    expires = ts_s + ttl_s if ttl_s else 0
    return rowupdate.encode({
        "table_id": table.id.bytes, "keyspace": table.keyspace, "table": table.table,
        "schema_hash": table.schema_hash, "partition_key": i32(pk), "clustering": [i32(line)],
        "kind": kind, "shadowable": False, "range": None, "deletion": None,
        "liveness": {"timestamp": ts_s * 1_000_000, "ttl": ttl_s,
                     "local_expiration_time": expires},
        "cells": [{"column": "qty", "path": None, "value": i32(qty),
                   "timestamp": ts_s * 1_000_000, "ttl": ttl_s, "local_deletion_time": expires,
                   "tombstone": False}],
        "complex_deletions": [],
        "source": {"host": "10.0.0.1", "datacenter": "dc1", "file": "CommitLog-7-5.log",
                   "segment_id": 5, "position": 200 + qty, "index": 0,
                   "commitlog_version": 7, "messaging_version": 12}})


def deletion_of(table: TableSchema, pk: int, ts_s: int) -> bytes:
    """The raw value of a DELETE of partition `pk` of `table` at `ts_s`."""
    return rowupdate.encode({
        "table_id": table.id.bytes, "keyspace": table.keyspace, "table": table.table,
        "schema_hash": table.schema_hash, "partition_key": i32(pk), "clustering": [],
        "kind": "PARTITION_DELETION", "shadowable": False, "range": None,
        "deletion": {"marked_for_delete_at": ts_s * 1_000_000, "local_deletion_time": ts_s},
        "liveness": None, "cells": [], "complex_deletions": [],
        "source": {"host": "10.0.0.1", "datacenter": "dc1", "file": "CommitLog-7-5.log",
                   "segment_id": 5, "position": 900 + pk, "index": 0,
                   "commitlog_version": 7, "messaging_version": 12}})
