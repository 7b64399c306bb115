"""Table schemas as both stages see them, and their JSON form (schema files, schema topic).

JSON schema file (format 1), as written by `casscade publisher schema` and read by
`--schema FILE`:

    {"format": 1,
     "types": {"<keyspace>": {"<udt>": [["<field>", "<cql type>"], ...]}},
     "tables": [{"keyspace": "ks", "table": "t", "id": "<uuid>", "cdc": true,
                 "gc_grace_seconds": 864000, "default_time_to_live": 0,
                 "columns": [{"name": "k", "kind": "partition_key", "position": 0,
                              "clustering_order": "none", "type": "int"}, ...],
                 "dropped_columns": [{"name": "x", "kind": "regular", "type": "text",
                                      "dropped_time": 1700000000000000}]}]}

Column kinds and type strings are those of system_schema.columns; `dropped_time` is in µs.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from shared.cqltype import CqlType, CqlTypeError, parse_cql_type

FORMAT = 1
KINDS = ("partition_key", "clustering", "static", "regular")


@dataclass(frozen=True, slots=True)
class ColumnSchema:
    """One column: its kind, position, CQL type (parsed) and, if dropped, when."""

    name: str
    kind: str
    position: int
    type_text: str
    type: CqlType
    clustering_order: str = "none"
    dropped_time_us: int | None = None

    def to_json(self) -> dict[str, Any]:
        """The column's JSON form (system_schema field names)."""
        out: dict[str, Any] = {"name": self.name, "kind": self.kind, "type": self.type_text}
        if self.dropped_time_us is None:
            out |= {"position": self.position, "clustering_order": self.clustering_order}
        else:
            out["dropped_time"] = self.dropped_time_us
        return out


@dataclass(frozen=True)
class TableSchema:
    """A table as of one schema version: columns, dropped columns and the CDC settings."""

    keyspace: str
    table: str
    id: uuid.UUID
    columns: tuple[ColumnSchema, ...]
    dropped: tuple[ColumnSchema, ...] = ()
    cdc: bool = False
    gc_grace_seconds: int = 864000
    default_time_to_live: int = 0
    udts: Mapping[str, tuple[tuple[str, str], ...]] = field(default_factory=dict)
    # When the table's schema last changed (µs: the write time of its system_schema.tables
    # row, rewritten by every ALTER); orders versions. Not part of to_json or the hash.
    altered_at_us: int = 0

    @property
    def name(self) -> str:
        """keyspace.table"""
        return f"{self.keyspace}.{self.table}"

    def _of_kind(self, kind: str) -> tuple[ColumnSchema, ...]:
        return tuple(sorted((c for c in self.columns if c.kind == kind),
                            key=lambda c: (c.position, c.name)))

    @property
    def partition_key(self) -> tuple[ColumnSchema, ...]:
        """Partition key columns in key order."""
        return self._of_kind("partition_key")

    @property
    def clustering(self) -> tuple[ColumnSchema, ...]:
        """Clustering columns in clustering order."""
        return self._of_kind("clustering")

    def column(self, name: str) -> ColumnSchema | None:
        """A current column by name, else a dropped one (as Cassandra resolves them)."""
        for c in self.columns:
            if c.name == name:
                return c
        for c in self.dropped:
            if c.name == name:
                return c
        return None

    def to_json(self) -> dict[str, Any]:
        """The table's JSON form (see the module doc)."""
        return {
            "keyspace": self.keyspace, "table": self.table, "id": str(self.id), "cdc": self.cdc,
            "gc_grace_seconds": self.gc_grace_seconds,
            "default_time_to_live": self.default_time_to_live,
            "columns": [c.to_json() for c in sorted(self.columns,
                                                    key=lambda c: (KINDS.index(c.kind),
                                                                   c.position, c.name))],
            "dropped_columns": [c.to_json() for c in sorted(self.dropped, key=lambda c: c.name)],
        }

    @property
    def schema_hash(self) -> str:
        """A stable hash of everything that affects decoding (columns, types, drops, UDTs)."""
        body = self.to_json() | {"types": {k: [list(f) for f in v]
                                           for k, v in sorted(self.udts.items())}}
        canonical = json.dumps(body, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def table_from_json(obj: Mapping[str, Any],
                    types: Mapping[str, Mapping[str, Iterable[Iterable[str]]]]) -> TableSchema:
    """Build a TableSchema from its JSON form; `types` maps keyspace → UDT → fields."""
    keyspace = obj["keyspace"]
    udts = {name: tuple((f, t) for f, t in fields)
            for name, fields in (types.get(keyspace) or {}).items()}
    columns = tuple(
        ColumnSchema(c["name"], c["kind"], int(c.get("position", 0)), c["type"],
                     _parse(c["type"], keyspace, udts), c.get("clustering_order", "none"))
        for c in obj["columns"])
    dropped = tuple(
        ColumnSchema(c["name"], c.get("kind", "regular"), 0, c["type"],
                     _parse(c["type"], keyspace, udts), "none",
                     int(c.get("dropped_time") or 0))
        for c in obj.get("dropped_columns", ()))
    for c in columns:
        if c.kind not in KINDS:
            raise ValueError(f"{keyspace}.{obj['table']}.{c.name}: unknown column kind {c.kind}")
    return TableSchema(keyspace, obj["table"], uuid.UUID(obj["id"]), columns, dropped,
                       bool(obj.get("cdc", False)), int(obj.get("gc_grace_seconds", 864000)),
                       int(obj.get("default_time_to_live", 0)), udts,
                       int(obj.get("altered_at") or 0))


def _parse(text: str, keyspace: str, udts: Mapping[str, tuple[tuple[str, str], ...]]) -> CqlType:
    # A type without a decoding rule must not hide the rest of the schema: it becomes an
    # "unsupported" type that fails only when a mutation actually carries that column.
    try:
        return parse_cql_type(text, keyspace, udts)
    except CqlTypeError as exc:
        return CqlType("unsupported", udt_name=str(exc))


def catalog_from_json(doc: Mapping[str, Any]) -> dict[uuid.UUID, TableSchema]:
    """All tables of a schema document (the module doc's format), by table id."""
    if doc.get("format") != FORMAT:
        raise ValueError(f"unsupported schema format {doc.get('format')!r} (expected {FORMAT})")
    types = doc.get("types", {})
    tables = (table_from_json(t, types) for t in doc.get("tables", ()))
    return {t.id: t for t in tables}
