"""Rows read by the bootstrap snapshot → SNAPSHOT_ROW RowUpdates (pure; no I/O).

A snapshot reads each row with `WRITETIME(col)` and `TTL(col)` per column, so the
materializer merges snapshot and live CDC last-write-wins with real timestamps. What CQL
cannot show is approximated, and the README says so:
* the row's primary-key liveness: its timestamp is the oldest cell write time (a row with
  no regular cells gets the snapshot's own time minus a day, so a later delete wins);
* non-frozen collections: Cassandra 5.0 gives one write time and TTL per element; a list
  element's real cell path (a timeuuid) is not visible, so a stable synthetic one is built
  from the element's write time and position (a later `DELETE l[i]` cannot match it);
* TTLs: the remaining TTL is known, the original is not: `ttl` carries the remaining one.
"""

from __future__ import annotations

import struct
import uuid
from typing import Any

from shared import codec
from shared.schema import ColumnSchema, TableSchema

DAY_US = 86_400 * 1_000_000


def select_statement(table: TableSchema) -> str:
    """The per-token-range SELECT: every column, WRITETIME and TTL of each non-key one."""
    key = [c.name for c in (*table.partition_key, *table.clustering)]
    cols = [c for c in table.columns if c.kind in ("regular", "static")]
    exprs = [_q(n) for n in key]
    for c in cols:
        exprs.append(_q(c.name))
        if c.type.name != "counter":  # Cassandra refuses WRITETIME/TTL of counters
            exprs += [f"WRITETIME({_q(c.name)})", f"TTL({_q(c.name)})"]
    pk = ", ".join(_q(c.name) for c in table.partition_key)
    return (f"SELECT {', '.join(exprs)} FROM {_q(table.keyspace)}.{_q(table.table)} "
            f"WHERE token({pk}) > ? AND token({pk}) <= ?")


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def row_record(table: TableSchema, row: tuple, now_s: int, now_us: int,
               source: dict[str, Any]) -> tuple[bytes, dict[str, Any]]:
    """(partition key bytes, SNAPSHOT_ROW record) for one row of `select_statement`."""
    values = iter(row)
    pk_parts = [codec.encode_value(c.type, next(values)) for c in table.partition_key]
    clustering = [codec.encode_value(c.type, next(values)) for c in table.clustering]
    cells: list[dict[str, Any]] = []
    for c in table.columns:
        if c.kind not in ("regular", "static"):
            continue
        value = next(values)
        wt, ttl = (None, None) if c.type.name == "counter" else (next(values), next(values))
        if value is None:
            continue
        cells += _cells(c, value, wt, ttl, now_s, now_us)
    partition_key = codec.encode_partition_key(table, pk_parts)
    stamps = [cell["timestamp"] for cell in cells]
    liveness_ts = min(stamps) if stamps else now_us - DAY_US
    record = {
        "table_id": table.id.bytes, "keyspace": table.keyspace, "table": table.table,
        "schema_hash": table.schema_hash, "partition_key": partition_key,
        "clustering": clustering, "kind": "SNAPSHOT_ROW", "deletion": None,
        "shadowable": False, "range": None,
        "liveness": {"timestamp": liveness_ts, "ttl": 0, "local_expiration_time": None},
        "cells": cells, "complex_deletions": [], "source": source,
    }
    return partition_key, record


def _cell(column: str, path: bytes | None, value: bytes, ts: int, ttl: int | None,
          now_s: int) -> dict[str, Any]:
    return {"column": column, "path": path, "value": value, "timestamp": ts,
            "ttl": ttl or 0, "local_deletion_time": now_s + ttl if ttl else None,
            "tombstone": False}


def _cells(c: ColumnSchema, value: Any, wt: Any, ttl: Any, now_s: int,
           now_us: int) -> list[dict[str, Any]]:
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
        for i, v in enumerate(value):
            path = _list_path(wts[i], i)
            out.append(_cell(c.name, path, codec.encode_value(t.params[0], v), wts[i],
                             ttls[i], now_s))
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
