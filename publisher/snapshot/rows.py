"""Rows read by the bootstrap snapshot → SNAPSHOT_ROW RowUpdates (pure; no I/O).

A snapshot reads each row with `WRITETIME(col)` and `TTL(col)` per column, so the
materializer merges snapshot and live CDC last-write-wins with real timestamps. What CQL
cannot show is approximated, and docs/operations.md says so:
* the row's primary-key liveness: its timestamp is the oldest cell write time (a row with
  no regular cells gets the snapshot's own time minus a day, so a later delete wins);
* non-frozen collections: Cassandra 5.0 gives one write time and TTL per element; a list
  element's real cell path (a timeuuid) is not visible, so the snapshot replaces the whole
  list: a complex deletion at the newest element write time, then the elements 1 µs later
  with stable synthetic paths (a later `DELETE l[i]` of such an element cannot match it);
* static columns go in a STATIC_ROW record, once per partition;
* TTLs: the remaining TTL is known, the original is not: `ttl` carries the remaining one.
"""

from __future__ import annotations

import struct
import uuid
from typing import Any

from shared import codec
from shared.schema import ColumnSchema, TableSchema

DAY_US = 86_400 * 1_000_000


def row_records(table: TableSchema, row: tuple, now_s: int, now_us: int,
                source: dict[str, Any], with_static: bool = True
                ) -> list[tuple[bytes, dict[str, Any]]]:
    """(partition key bytes, record) pairs for one row of `shared.table_scan`'s SELECT:
    the row as a SNAPSHOT_ROW, preceded (when `with_static`, i.e. for a partition's first
    row) by its static columns as a STATIC_ROW record."""
    values = iter(row)
    pk_parts = [codec.encode_value(c.type, next(values)) for c in table.partition_key]
    ck_values = [next(values) for _ in table.clustering]
    # SELECT shows a partition with only static data as one row with null clustering
    static_only = any(v is None for v in ck_values)
    clustering = [] if static_only else [codec.encode_value(c.type, v) for c, v in
                                         zip(table.clustering, ck_values, strict=True)]
    cells: list[dict[str, Any]] = []
    static: list[dict[str, Any]] = []
    for c in table.columns:
        if c.kind not in ("regular", "static"):
            continue
        value = next(values)
        wt, ttl = (None, None) if c.type.name == "counter" else (next(values), next(values))
        if value is None:
            continue
        (static if c.kind == "static" else cells).extend(_cells(c, value, wt, ttl, now_s))
    partition_key = codec.encode_partition_key(table, pk_parts)
    base = {"table_id": table.id.bytes, "keyspace": table.keyspace, "table": table.table,
            "schema_hash": table.schema_hash, "partition_key": partition_key,
            "deletion": None, "shadowable": False, "range": None, "source": source}
    out = []
    if with_static and static:
        out.append((partition_key, base | {
            "clustering": [], "kind": "STATIC_ROW", "liveness": None,
            "cells": [c for c in static if not c.get("_complex_deletion")],
            "complex_deletions": _complex_deletions(static, now_s)}))
    stamps = [cell["timestamp"] for cell in cells]
    liveness_ts = min(stamps) if stamps else now_us - DAY_US
    if not static_only:
        out.append((partition_key, base | {
            "clustering": clustering, "kind": "SNAPSHOT_ROW",
            "liveness": {"timestamp": liveness_ts, "ttl": 0, "local_expiration_time": None},
            "cells": [c for c in cells if not c.get("_complex_deletion")],
            "complex_deletions": _complex_deletions(cells, now_s)}))
    return out


def _complex_deletions(cells: list[dict[str, Any]], now_s: int) -> list[dict[str, Any]]:
    return [{"column": c["column"], "marked_for_delete_at": c["timestamp"],
             "local_deletion_time": now_s} for c in cells if c.get("_complex_deletion")]


def _cell(column: str, path: bytes | None, value: bytes, ts: int, ttl: int | None,
          now_s: int) -> dict[str, Any]:
    return {"column": column, "path": path, "value": value, "timestamp": ts,
            "ttl": ttl or 0, "local_deletion_time": now_s + ttl if ttl else None,
            "tombstone": False}


def _cells(c: ColumnSchema, value: Any, wt: Any, ttl: Any, now_s: int
           ) -> list[dict[str, Any]]:
    t = c.type
    if t.name == "counter":
        # a context with one global shard holding the whole total (the snapshot's view)
        ctx = struct.pack(">hh", 1, -32768) + b"\x00" * 16 + struct.pack(">qq", 0, int(value))
        return [_cell(c.name, None, ctx, 0, None, now_s)]
    if not t.is_multicell:
        return [_cell(c.name, None, codec.encode_value(t, value), wt, ttl, now_s)]
    wts = wt if isinstance(wt, list) else [wt] * _size(value)
    ttls = ttl if isinstance(ttl, list) else [ttl] * _size(value)
    out = []
    if t.name == "udt":
        for i, (f, ft) in enumerate(zip(t.field_names, t.params, strict=True)):
            v = getattr(value, f, None)
            if v is not None and wts[i] is not None:
                out.append(_cell(c.name, struct.pack(">h", i), codec.encode_value(ft, v),
                                 wts[i], ttls[i], now_s))
        return out
    if t.name == "list":
        # The real element paths are invisible to CQL: replace the whole list. A complex
        # deletion at the newest element write time removes the real-path copies CDC may
        # also deliver; the elements follow 1 µs later with stable synthetic paths.
        newest = max(w for w in wts if w is not None)
        out.append({"column": c.name, "timestamp": newest, "_complex_deletion": True})
        for i, v in enumerate(value):
            out.append(_cell(c.name, _list_path(newest + 1, i),
                             codec.encode_value(t.params[0], v), newest + 1, ttls[i], now_s))
        return out
    if t.name == "set":
        for i, v in enumerate(value):
            out.append(_cell(c.name, codec.encode_value(t.params[0], v), b"", wts[i],
                             ttls[i], now_s))
        return out
    for i, (k, v) in enumerate(value.items()):  # map
        out.append(_cell(c.name, codec.encode_value(t.params[0], k),
                         codec.encode_value(t.params[1], v), wts[i], ttls[i], now_s))
    return out


def _size(value: Any) -> int:
    return len(value._fields) if hasattr(value, "_fields") else len(value)


def _list_path(ts_us: int, index: int) -> bytes:
    """A version-1 UUID ordered by (write time, index): stable across snapshot re-runs."""
    ticks = ts_us * 10 + 0x01B21DD213814000 + index  # 100 ns units since 1582-10-15
    return uuid.UUID(fields=(ticks & 0xFFFFFFFF, (ticks >> 32) & 0xFFFF,
                             ((ticks >> 48) & 0x0FFF) | 0x1000, 0x80, 0, index & 0xFFFFFFFFFFFF)
                     ).bytes
