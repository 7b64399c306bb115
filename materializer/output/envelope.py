"""Change events in the Debezium envelope, as Kafka Connect JSON (docs/architecture.md
"Change events").

Value: {before, after, source, op, ts_ms}; key: the primary key columns. With
`schemas=True` each is wrapped as {"schema": ..., "payload": ...} exactly as Kafka Connect's
JsonConverter does with schemas.enable=true, so Connect sinks can read the topic directly.
"""

from __future__ import annotations

import json
from functools import cached_property
from typing import Any

import orjson

from materializer.output.values import (
    MODES,
    RowRenderer,
    ValueModes,
    connect_schema,
    json_default,
)
from shared.schema import TableSchema

CONNECTOR = "casscade"
VERSION = "0.1.0"
_SOURCE_FIELDS = [("version", "string"), ("connector", "string"), ("name", "string"),
                  ("ts_ms", "int64"), ("snapshot", "string"), ("db", "string"),
                  ("keyspace", "string"), ("table", "string"), ("host", "string"),
                  ("datacenter", "string"), ("file", "string"), ("pos", "int64"),
                  ("index", "int32"), ("ts_us", "int64"), ("kafka_topic", "string"),
                  ("kafka_partition", "int32"), ("kafka_offset", "int64")]


_WIDE_INT = "Integer exceeds 64-bit range"


def dumps(obj: Any, wide_ints: bool = True) -> bytes:
    """Compact UTF-8 JSON, bytes as base64; `wide_ints` False: an integer beyond 64 bits is
    refused (OverflowError) instead of written exactly."""
    try:
        return orjson.dumps(obj, default=json_default, option=orjson.OPT_NON_STR_KEYS)
    except orjson.JSONEncodeError as exc:  # a TypeError
        if _WIDE_INT not in str(exc):
            raise
        if not wide_ints:
            # under an int64 schema Kafka's JsonConverter would silently wrap it
            raise OverflowError("a varint beyond 64 bits cannot be an int64 (set "
                                "events.varint_mode to string for exact varints)") from exc
        # an integer beyond 64 bits (a varint): orjson refuses it, the standard library
        # writes it exactly (the same JSON otherwise)
        return json.dumps(obj, default=json_default, separators=(",", ":"),
                          ensure_ascii=False).encode()


class EnvelopeWriter:
    """Serializes events of one table version."""

    def __init__(self, table: TableSchema, cluster: str, schemas: bool,
                 modes: ValueModes = MODES) -> None:
        self.table = table
        self.cluster = cluster
        self.schemas = schemas
        self.modes = modes
        self.rows = RowRenderer(table, modes)
        self.name = f"{cluster}.{table.keyspace}.{table.table}"

    @cached_property
    def key_schema(self) -> dict[str, Any]:
        """Connect schema of the key struct."""
        cols = list(self.table.partition_key) + list(self.table.clustering)
        return {"type": "struct", "name": f"{self.name}.Key", "optional": False,
                "fields": [connect_schema(c.type, c.name, self.modes)
                           | {"optional": c.kind != "partition_key"} for c in cols]}

    @cached_property
    def value_schema(self) -> dict[str, Any]:
        """Connect schema of the envelope."""
        cols = (list(self.table.partition_key) + list(self.table.clustering)
                + [c for c in self.table.columns if c.kind in ("static", "regular")])
        row = {"type": "struct", "name": f"{self.name}.Value", "optional": True,
               "fields": [connect_schema(c.type, c.name, self.modes) for c in cols]}
        source = {"type": "struct", "name": "io.casscade.Source", "optional": False,
                  "field": "source", "fields": [{"type": t, "optional": True, "field": f}
                                                for f, t in _SOURCE_FIELDS]}
        return {"type": "struct", "name": f"{self.name}.Envelope", "optional": False,
                "fields": [row | {"field": "before"}, row | {"field": "after"}, source,
                           {"type": "string", "optional": False, "field": "op"},
                           {"type": "int64", "optional": True, "field": "ts_ms"}]}

    def key(self, key: dict[str, Any]) -> bytes:
        """Serialized key."""
        return dumps({"schema": self.key_schema, "payload": key} if self.schemas else key,
                     self.modes.varint != "long")

    def value(self, op: str, before: dict | None, after: dict | None, source: dict[str, Any],
              ts_ms: int) -> bytes:
        """Serialized envelope."""
        payload = {"before": before, "after": after, "source": source, "op": op,
                   "ts_ms": ts_ms}
        return dumps({"schema": self.value_schema, "payload": payload} if self.schemas
                     else payload, self.modes.varint != "long")

    def source(self, ts_us: int, snapshot: bool = False, **where: Any) -> dict[str, Any]:
        """The `source` block: where and when the change happened."""
        out = dict(self._source_base)
        out.update(where)
        out["ts_ms"], out["ts_us"] = ts_us // 1000, ts_us
        out["snapshot"] = "true" if snapshot else "false"
        return out

    @cached_property
    def _source_base(self) -> dict[str, Any]:
        base: dict[str, Any] = dict.fromkeys(f for f, _ in _SOURCE_FIELDS)
        return base | {"version": VERSION, "connector": CONNECTOR, "name": self.cluster,
                       "db": self.table.keyspace, "keyspace": self.table.keyspace,
                       "table": self.table.table}
