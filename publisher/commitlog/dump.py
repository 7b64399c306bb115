"""Decoded mutations → JSON-ready dicts (the commit log counterpart of sstabledump)."""

from __future__ import annotations

from typing import Any

from publisher.commitlog.model import (
    Cell,
    DeletionTime,
    Mutation,
    PartitionUpdate,
    RangeTombstoneMarker,
    Row,
)
from shared import codec
from shared.jsonvalues import JsonValue, to_json_value


def mutation_to_json(m: Mutation, file: str) -> dict[str, Any]:
    """One mutation with decoded values, timestamps, TTLs, deletions and its position."""
    return {
        "file": file, "segment_id": m.segment_id, "start": m.start, "position": m.position,
        "keyspace": m.keyspace, "updates": [update_to_json(u) for u in m.updates],
    }


def update_to_json(u: PartitionUpdate) -> dict[str, Any]:
    """One partition update."""
    t = u.table
    out: dict[str, Any] = {
        "table": t.table, "table_id": str(t.id),
        "partition_key": _values(codec.decode_partition_key(t, u.partition_key)),
        "partition_key_raw": "0x" + u.partition_key.hex(),
    }
    if u.partition_deletion is not None:
        out["partition_deletion"] = deletion_to_json(u.partition_deletion)
    if u.static_row is not None:
        out["static_row"] = row_to_json(u, u.static_row)
    out["rows"] = [row_to_json(u, r) for r in u.rows]
    out["range_tombstones"] = [marker_to_json(u, m) for m in u.markers]
    return out


def row_to_json(u: PartitionUpdate, r: Row) -> dict[str, Any]:
    """One row (or the static row) with its cells."""
    out: dict[str, Any] = {}
    if not r.is_static:
        out["clustering"] = _values(codec.decode_clustering(u.table, r.clustering))
    if r.liveness is not None:
        out["liveness"] = {"timestamp": r.liveness.timestamp, "ttl": r.liveness.ttl,
                           "local_expiration_time": r.liveness.local_expiration_time}
    if r.deletion is not None:
        out["deletion"] = deletion_to_json(r.deletion) | (
            {"shadowable": True} if r.shadowable else {})
    if r.complex_deletions:
        out["complex_deletions"] = {name: deletion_to_json(d)
                                    for name, d in r.complex_deletions.items()}
    out["cells"] = [cell_to_json(c) for c in r.cells]
    return out


def cell_to_json(c: Cell) -> dict[str, Any]:
    """One cell: column, element path if any, decoded value, timestamp, TTL, tombstone."""
    out: dict[str, Any] = {"column": c.column.name}
    if c.column.dropped_time_us is not None:
        out["dropped_column"] = True
    if c.path is not None:
        out["path"] = to_json_value(codec.decode_cell_path(c.column, c.path))
    if c.tombstone:
        out["tombstone"] = True
    else:
        out["value"] = to_json_value(codec.decode_cell_value(c.column, c.path, c.value))
    out["timestamp"] = c.timestamp
    if c.ttl:
        out["ttl"] = c.ttl
    if c.local_deletion_time is not None:
        out["local_deletion_time"] = c.local_deletion_time
    return out


def marker_to_json(u: PartitionUpdate, m: RangeTombstoneMarker) -> dict[str, Any]:
    """One range tombstone bound or boundary."""
    out: dict[str, Any] = {"kind": m.kind_name,
                           "bound": _values(codec.decode_clustering(u.table, m.values))}
    if m.end_deletion is not None:
        out["end_deletion"] = deletion_to_json(m.end_deletion)
    if m.start_deletion is not None:
        out["start_deletion"] = deletion_to_json(m.start_deletion)
    return out


def deletion_to_json(d: DeletionTime) -> dict[str, Any]:
    """A deletion time."""
    return {"marked_for_delete_at": d.marked_for_delete_at,
            "local_deletion_time": d.local_deletion_time}


def _values(values: dict[str, Any]) -> dict[str, JsonValue]:
    return {k: to_json_value(v) for k, v in values.items()}
