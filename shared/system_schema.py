"""A node's schema as casscade's schema document, read from Cassandra's system_schema tables
through cassandra-driver (the publisher's schema source, snapshot and verify read it)."""

from __future__ import annotations

from typing import Any


def read_system_schema(session: Any) -> dict[str, Any]:
    """Every table, column, dropped column and UDT of the node, as a schema document."""
    types: dict[str, dict[str, list[list[str]]]] = {}
    for row in session.execute("SELECT keyspace_name, type_name, field_names, field_types "
                               "FROM system_schema.types"):
        types.setdefault(row.keyspace_name, {})[row.type_name] = [
            [f, t] for f, t in zip(row.field_names, row.field_types, strict=True)]
    columns: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for row in session.execute("SELECT keyspace_name, table_name, column_name, kind, position, "
                               "clustering_order, type FROM system_schema.columns"):
        columns.setdefault((row.keyspace_name, row.table_name), []).append(
            {"name": row.column_name, "kind": row.kind, "position": max(row.position, 0),
             "clustering_order": row.clustering_order, "type": row.type})
    dropped: dict[tuple[str, str], list[dict[str, Any]]] = {}
    # Some system tables record drop times beyond Python's datetime range: read them as
    # milliseconds.
    for row in session.execute("SELECT keyspace_name, table_name, column_name, "
                               "CAST(dropped_time AS bigint) AS dropped_ms, kind, type "
                               "FROM system_schema.dropped_columns"):
        dropped.setdefault((row.keyspace_name, row.table_name), []).append(
            {"name": row.column_name, "kind": row.kind or "regular", "type": row.type,
             "dropped_time": (row.dropped_ms or 0) * 1000})
    tables = []
    # Every CREATE/ALTER rewrites the table's row, so its write time orders schema versions
    # (checked on 5.0.8: ADD and DROP both move it).
    for row in session.execute("SELECT keyspace_name, table_name, id, cdc, gc_grace_seconds, "
                               "default_time_to_live, WRITETIME(comment) AS altered_at "
                               "FROM system_schema.tables"):
        key = (row.keyspace_name, row.table_name)
        tables.append({
            "keyspace": row.keyspace_name, "table": row.table_name, "id": str(row.id),
            "cdc": bool(row.cdc), "gc_grace_seconds": row.gc_grace_seconds,
            "default_time_to_live": row.default_time_to_live,
            "altered_at": row.altered_at or 0,
            "columns": columns.get(key, []), "dropped_columns": dropped.get(key, []),
        })
    return {"format": 1, "types": types, "tables": tables}
