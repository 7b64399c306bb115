"""Kafka Connect schemas → Avro schemas, and Connect values → Avro data (pure).

The mapping is the one Confluent's AvroConverter applies, so a consumer of the Avro topic
sees what it would see from a Debezium connector with that converter:
- optional fields are `["null", T]` with default null; required ones are plain `T`;
- int8/int16 are Avro `int` (with `connect.type`), float32 `float`, float64 `double`;
- Connect Date / Timestamp carry Avro `date` / `timestamp-millis` logical types and, like all
  named Connect types, `connect.name` / `connect.version`;
- a struct is a record; a map with string keys an Avro map; any other map an array of
  `{key, value}` records (Avro map keys can only be strings);
- a record named twice (the row in `before` and `after`) is defined once, then referenced.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

_PRIMITIVE = {"int8": "int", "int16": "int", "int32": "int", "int64": "long",
              "float": "float", "float32": "float", "double": "double", "float64": "double",
              "boolean": "boolean", "string": "string", "bytes": "bytes"}
_LOGICAL = {"org.apache.kafka.connect.data.Date": "date",
            "org.apache.kafka.connect.data.Timestamp": "timestamp-millis"}
_INVALID = re.compile(r"[^A-Za-z0-9_]")


def avro_field_name(name: str) -> str:
    """`name` made a valid Avro simple name ([A-Za-z_][A-Za-z0-9_]*)."""
    out = _INVALID.sub("_", name) or "_"
    return "_" + out if out[0].isdigit() else out


def avro_name(name: str) -> str:
    """A dotted Connect name made a valid Avro full name."""
    return ".".join(avro_field_name(p) for p in name.split("."))


class AvroSchemaBuilder:
    """Builds one Avro schema from one Connect schema; names stay unique within it."""

    def __init__(self) -> None:
        self._defined: set[str] = set()

    def build(self, schema: dict[str, Any], path: str) -> Any:
        """The Avro schema of `schema`; `path` names records the Connect schema leaves
        unnamed (tuples)."""
        inner = self._required(schema, path)
        if schema.get("optional", False):
            return ["null", inner]
        return inner

    def _required(self, schema: dict[str, Any], path: str) -> Any:
        t = schema["type"]
        if t in _PRIMITIVE:
            out: dict[str, Any] = {"type": _PRIMITIVE[t]}
            if t in ("int8", "int16"):
                out["connect.type"] = t
            name = schema.get("name")
            if name:
                out["connect.name"] = name
                if "version" in schema:
                    out["connect.version"] = schema["version"]
                if name in _LOGICAL:
                    out["logicalType"] = _LOGICAL[name]
            return out if len(out) > 1 else out["type"]
        if t == "array":
            return {"type": "array", "items": self.build(schema["items"], path + "_item")}
        if t == "map":
            values = self.build(schema["values"], path + "_value")
            if schema["keys"]["type"] == "string":
                return {"type": "map", "values": values}
            entry = {"type": "record", "name": avro_name(path + "_entry"),
                     "fields": [{"name": "key", "type": self.build(schema["keys"],
                                                                  path + "_key")},
                                {"name": "value", "type": values}]}
            return {"type": "array", "items": self._record(entry)}
        if t == "struct":
            name = avro_name(schema.get("name") or path)
            if name in self._defined:
                return name  # a reference to the record defined earlier in this schema
            fields = []
            for f in schema["fields"]:
                field: dict[str, Any] = {"name": avro_field_name(f["field"]),
                                         "type": self.build(f, f"{name}_{f['field']}")}
                if f.get("optional", False):
                    field["default"] = None
                fields.append(field)
            return self._record({"type": "record", "name": name, "fields": fields})
        raise ValueError(f"no Avro form for Connect type {t!r} at {path}")

    def _record(self, record: dict[str, Any]) -> dict[str, Any] | str:
        if record["name"] in self._defined:
            return str(record["name"])
        self._defined.add(record["name"])
        return record


def to_avro_schema(schema: dict[str, Any], name: str) -> Any:
    """The Avro schema of a whole Connect schema (a key or an envelope)."""
    return AvroSchemaBuilder().build(schema, name)


def _identity(v: Any) -> Any:
    return v


def value_converter(schema: dict[str, Any]) -> Callable[[Any], Any]:
    """A function turning a Connect value (values.to_connect form) into Avro data.

    Only maps with non-string keys differ (pairs → `{key, value}` records), so for every
    other schema this is the identity and costs nothing per row.
    """
    t = schema["type"]
    if t == "array":
        item = value_converter(schema["items"])
        if item is _identity:
            return _identity
        return lambda v: None if v is None else [item(x) for x in v]
    if t == "map":
        keys, values = value_converter(schema["keys"]), value_converter(schema["values"])
        if schema["keys"]["type"] != "string":
            return lambda v: None if v is None else [{"key": keys(k), "value": values(x)}
                                                     for k, x in v]
        if values is _identity:
            return _identity
        return lambda v: None if v is None else {k: values(x) for k, x in v.items()}
    if t == "struct":
        fields = [(f["field"], avro_field_name(f["field"]), value_converter(f))
                  for f in schema["fields"]]
        if all(conv is _identity and src == dst for src, dst, conv in fields):
            return _identity
        return lambda v: None if v is None else {dst: conv(v.get(src))
                                                 for src, dst, conv in fields}
    return _identity
