"""The shop.orders table, its schema registry and the clock of the key materializer tests."""

from __future__ import annotations

import struct
import uuid

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
