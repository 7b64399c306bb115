"""Raw row images → typed column values and their Kafka Connect schemas.

Types follow the Debezium Cassandra connector's mapping: text/ascii/inet/uuid → string,
tinyint/smallint/int/bigint/counter → int8/16/32/64, float/double → float32/64, blob →
bytes, date → int32 days (Connect `Date`), time → int64 ns (`io.debezium.time.NanoTime`),
timestamp → int64 ms (Connect `Timestamp`), duration → int64 ns
(`io.debezium.time.NanoDuration`, a month counted as 30 days), list/set/vector → array,
map → map, tuple → struct (field1..N, named `io.casscade.Tuple_<types>`), UDT → struct
(named `<keyspace>.<type>`). `structs` mode "json" sends a tuple or UDT instead as its JSON
text under Debezium's `io.debezium.data.Json` name, which Debezium's JDBC sink writes as a
`json` column (it has no column type for a struct). `maps` mode "json" does the same for a
map: that sink writes a Connect map as PostgreSQL `hstore`, which needs the hstore extension,
keeps only text, and (3.4.3) failed on random text ("Syntax error near ..."). Inside JSON text
decimals and varints are plain strings. A map with keys that are not strings is, in JSON
text as in Connect JSON, a list of [key, value] pairs.

Except for exact numbers, where that connector loses digits. A decimal (float64 there:
12345678901234.56789 arrives as 12345678901234.568) is `decimal` mode "precise" here, as
Debezium's relational connectors send a decimal of variable scale: an
`io.debezium.data.VariableScaleDecimal` struct {scale int32, value bytes: the unscaled value,
two's complement big-endian} (a table Debezium's JDBC sink creates gets `double precision`
for it, docs/connect.md); "string" gives
its plain text, "double" the float64. A varint is `varint` mode "long" (int64, as there) or
"string" (exact text; the job's default, events.varint_mode); in "long" mode the envelope
writers refuse a value beyond 64 bits (the event goes to the dead-letter topic) rather than
write a number its int64 schema cannot hold.

Values are JSON-ready: bytes stay bytes here and become base64 in the JSON envelope (as
Kafka Connect's JsonConverter writes them).
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import math
import re
import struct
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from shared import codec
from shared.cqltype import CqlType
from shared.schema import ColumnSchema, TableSchema

_EPOCH = dt.datetime(1970, 1, 1)
_NS_PER_DAY = 86_400 * 10**9
_SIMPLE = {
    "ascii": "string", "text": "string", "varchar": "string", "inet": "string",
    "uuid": "string", "timeuuid": "string", "boolean": "boolean", "tinyint": "int8",
    "smallint": "int16", "int": "int32", "bigint": "int64", "counter": "int64",
    "varint": "int64", "float": "float", "double": "double", "decimal": "double",
    "blob": "bytes", "date": "int32", "time": "int64", "timestamp": "int64",
    "duration": "int64",
}
_LOGICAL = {"date": "org.apache.kafka.connect.data.Date",
            "timestamp": "org.apache.kafka.connect.data.Timestamp",
            "time": "io.debezium.time.NanoTime", "duration": "io.debezium.time.NanoDuration",
            "uuid": "io.debezium.data.Uuid", "timeuuid": "io.debezium.data.Uuid"}
# How exact numbers travel (the module doc); the first of each is the default, shared by
# the job's settings and every writer here.
DECIMAL_MODES = ("precise", "string", "double")
VARINT_MODES = ("string", "long")
STRUCT_MODES = ("struct", "json")
MAP_MODES = ("map", "json")
DECIMAL, VARINT = DECIMAL_MODES[0], VARINT_MODES[0]
STRUCTS, MAPS = STRUCT_MODES[0], MAP_MODES[0]
JSON_NAME = "io.debezium.data.Json"
VARIABLE_SCALE_DECIMAL = "io.debezium.data.VariableScaleDecimal"
_VSD_FIELDS = [{"type": "int32", "optional": False, "field": "scale"},
               {"type": "bytes", "optional": False, "field": "value"}]


@dataclass(frozen=True)
class ValueModes:
    """How the values with more than one sensible Connect form travel (the module doc)."""

    varint: str = VARINT  # VARINT_MODES
    decimal: str = DECIMAL  # DECIMAL_MODES
    structs: str = STRUCTS  # STRUCT_MODES
    maps: str = MAPS  # MAP_MODES

    def __post_init__(self) -> None:
        for what, value, allowed in (("varint_mode", self.varint, VARINT_MODES),
                                     ("decimal_mode", self.decimal, DECIMAL_MODES),
                                     ("struct_mode", self.structs, STRUCT_MODES),
                                     ("map_mode", self.maps, MAP_MODES)):
            if value not in allowed:
                raise ValueError(f"events.{what} must be one of {', '.join(allowed)}, "
                                 f"not {value!r}")


MODES = ValueModes()
# Inside a struct sent as JSON text, exact numbers are plain strings: readable in a json
# column, and nothing there reads a schema.
_IN_JSON = ValueModes(varint="string", decimal="string")


def tuple_name(t: CqlType) -> str:
    """The Connect schema name of a tuple type: one name per tuple type, so an Avro schema
    built from it reuses a record only for the same tuple."""
    return "io.casscade.Tuple_" + "_".join(re.sub(r"\W+", "_", p.cql()).strip("_")
                                           for p in t.params)


def connect_schema(t: CqlType, field: str | None = None,
                   modes: ValueModes = MODES) -> dict[str, Any]:
    """The Kafka Connect (JsonConverter) schema of a column of type `t` with `modes` (the
    module doc)."""
    out: dict[str, Any]
    varint, decimal = modes.varint, modes.decimal
    if (t.name == "varint" and varint == "string") or (t.name == "decimal"
                                                         and decimal == "string"):
        out = {"type": "string"}
    elif _as_json(t, modes):
        out = {"type": "string", "name": JSON_NAME, "version": 1}
    elif t.name == "decimal" and decimal == "precise":
        out = {"type": "struct", "name": VARIABLE_SCALE_DECIMAL, "version": 1,
               "fields": [dict(f) for f in _VSD_FIELDS]}
    elif t.name in _SIMPLE:
        out = {"type": _SIMPLE[t.name]}
        if t.name in _LOGICAL:
            out |= {"name": _LOGICAL[t.name], "version": 1}
    elif t.name in ("list", "set", "vector"):
        out = {"type": "array", "items": connect_schema(t.params[0], None, modes)}
    elif t.name == "map":
        out = {"type": "map", "keys": connect_schema(t.params[0], None, modes),
               "values": connect_schema(t.params[1], None, modes)}
    elif t.name == "tuple":
        out = {"type": "struct", "name": tuple_name(t),
               "fields": [connect_schema(p, f"field{i + 1}", modes)
                          for i, p in enumerate(t.params)]}
    elif t.name == "udt":
        out = {"type": "struct", "name": f"{t.keyspace}.{t.udt_name}",
               "fields": [connect_schema(p, f, modes)
                          for f, p in zip(t.field_names, t.params, strict=True)]}
    else:
        out = {"type": "bytes"}  # a type without a mapping travels as its raw bytes
    out["optional"] = True
    if field is not None:
        out["field"] = field
    return out


def to_connect(t: CqlType, v: Any, modes: ValueModes = MODES) -> Any:
    """A driver-decoded value of type `t` in its Connect form for `modes` (the module
    doc)."""
    if v is None:
        return None
    n = t.name
    if _as_json(t, modes):
        return json_text(to_connect(t, v, _IN_JSON))
    if n == "varint":
        return str(v) if modes.varint == "string" else v
    if n in ("uuid", "timeuuid", "inet"):
        return str(v)
    if n == "decimal":
        return _decimal(v, modes.decimal)
    if n == "float" or n == "double":
        return v if math.isfinite(v) else None  # JSON has no NaN/Infinity
    if n == "timestamp":
        if isinstance(v, int):
            return v
        if v.tzinfo is not None:
            v = v.astimezone(dt.UTC).replace(tzinfo=None)
        return (v - _EPOCH) // dt.timedelta(milliseconds=1)
    if n == "date":
        return v.days_from_epoch if hasattr(v, "days_from_epoch") else (v - _EPOCH.date()).days
    if n == "time":
        return v.nanosecond_time if hasattr(v, "nanosecond_time") else int(v)
    if n == "duration":
        return (v.months * 30 + v.days) * _NS_PER_DAY + v.nanoseconds
    if n in ("list", "set", "vector"):
        return [to_connect(t.params[0], x, modes) for x in v]
    if n == "map":
        pairs = [(to_connect(t.params[0], k, modes), to_connect(t.params[1], x, modes))
                 for k, x in v.items()]
        if _SIMPLE.get(t.params[0].name) == "string":
            return dict(pairs)  # JsonConverter: an object for string keys, else pairs
        return [list(p) for p in pairs]
    if n in ("tuple", "udt"):
        return _struct(t, v, modes)
    return v


def _as_json(t: CqlType, modes: ValueModes) -> bool:
    """Whether `t` travels as JSON text in `modes`."""
    return ((t.name in ("tuple", "udt") and modes.structs == "json")
            or (t.name == "map" and modes.maps == "json"))


def _struct(t: CqlType, v: Any, modes: ValueModes) -> dict[str, Any]:
    """A tuple's or UDT's fields in their Connect form."""
    if t.name == "tuple":
        return {f"field{i + 1}": to_connect(p, x, modes)
                for i, (p, x) in enumerate(zip(t.params, v, strict=False))}
    return {f: to_connect(p, getattr(v, f, None) if not isinstance(v, dict) else v.get(f),
                          modes)
            for f, p in zip(t.field_names, t.params, strict=True)}


def json_text(value: Any) -> str:
    """`value` (in its Connect form) as compact JSON text, bytes as base64."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=json_default)


def json_default(o: Any) -> Any:
    """JSON for what json/orjson cannot write: bytes as base64 (JsonConverter's form)."""
    if isinstance(o, bytes | bytearray):
        return base64.b64encode(o).decode()
    raise TypeError(f"not JSON serializable: {type(o).__name__}")


def _decimal(v: Any, mode: str) -> Any:
    """A decimal (the driver's Decimal) in its Connect form for `mode` (DECIMAL_MODES)."""
    if mode == "double":
        return float(v)
    if mode == "string":
        return format(v, "f")  # plain, as Java's toPlainString: no exponent
    sign, digits, exponent = v.as_tuple()
    unscaled = int("".join(map(str, digits)) or "0") * (-1 if sign else 1)
    return {"scale": -int(exponent), "value": unscaled_bytes(unscaled)}


def unscaled_bytes(n: int) -> bytes:
    """`n` as Java's BigInteger.toByteArray(): minimal two's complement, big-endian."""
    return n.to_bytes((n + (n < 0)).bit_length() // 8 + 1, "big", signed=True)


def _fast(t: CqlType) -> Callable[[bytes], Any] | None:
    """Direct decoders for the most common simple types (no driver round trip)."""
    n = t.name
    if n in ("text", "varchar", "ascii"):
        return lambda raw: raw.decode()
    if n == "int":
        return lambda raw: struct.unpack(">i", raw)[0] if len(raw) == 4 else None
    if n in ("bigint", "timestamp"):
        return lambda raw: struct.unpack(">q", raw)[0] if len(raw) == 8 else None
    if n == "boolean":
        return lambda raw: raw != b"\x00" if raw else None
    if n == "double":
        return lambda raw: _finite(struct.unpack(">d", raw)[0]) if len(raw) == 8 else None
    if n in ("uuid", "timeuuid"):
        return lambda raw: str(uuid.UUID(bytes=raw)) if len(raw) == 16 else None
    if n == "blob":
        return bytes
    return None


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


class RowRenderer:
    """Turns raw images and keys of one table version into typed dicts."""

    def __init__(self, table: TableSchema, modes: ValueModes = MODES) -> None:
        self.table = table
        self.modes = modes
        self.partition_key = table.partition_key
        self.clustering = table.clustering
        decoders = {c.name: self._decoder(c) for c in table.columns}
        # (name, decoder, empty-means-null) in output order
        self._pk = [self._entry(c, decoders) for c in self.partition_key]
        self._ck = [self._entry(c, decoders) for c in self.clustering]
        self._regular = [self._entry(c, decoders) for c in table.columns
                         if c.kind in ("regular", "static")]
        self._last_pk: tuple[bytes, dict[str, Any]] | None = None

    @staticmethod
    def _entry(c: ColumnSchema, decoders: dict[str, Callable[[Any], Any]]
               ) -> tuple[str, Callable[[Any], Any], bool]:
        return c.name, decoders[c.name], c.type.name not in ("text", "ascii", "varchar", "blob")

    def _decoder(self, c: ColumnSchema) -> Callable[[Any], Any]:
        t, modes = c.type, self.modes
        if t.is_multicell:
            return lambda cells: to_connect(t, _complex(c, cells), modes)
        if t.name == "counter":
            return codec.counter_total
        fast = _fast(t)
        if fast is not None:
            return fast
        return lambda raw: to_connect(t, codec.decode_value(t, raw), modes)

    def key(self, partition_key: bytes, clustering: tuple[bytes | None, ...]) -> dict[str, Any]:
        """Primary key column → value."""
        last = self._last_pk  # the events of one call share their partition key
        if last is None or last[0] != partition_key:
            parts = codec.split_partition_key(self.table, partition_key)
            last = self._last_pk = (partition_key, {
                name: _decode(fn, empty_null, raw)
                for (name, fn, empty_null), raw in zip(self._pk, parts, strict=True)})
        out = dict(last[1])
        for i, (name, fn, empty_null) in enumerate(self._ck):
            # a static-only row of a partition has no clustering values
            out[name] = _decode(fn, empty_null, clustering[i]) if i < len(clustering) else None
        return out

    def row(self, key: dict[str, Any], image: dict[str, Any] | None) -> dict[str, Any] | None:
        """The complete row: key columns, then every other column (null where unset)."""
        if image is None:
            return None
        out = dict(key)
        get = image.get
        for name, fn, empty_null in self._regular:
            out[name] = _decode(fn, empty_null, get(name))
        return out


def _decode(fn: Callable[[Any], Any], empty_null: bool, raw: Any) -> Any:
    if raw is None or (empty_null and not raw):
        return None  # absent, or an empty value: no value of the type
    return fn(raw)


def _complex(column: ColumnSchema, cells: tuple[tuple[bytes, bytes | None], ...]) -> Any:
    t = column.type
    if t.name == "list":
        ordered = sorted(cells, key=lambda pv: (uuid.UUID(bytes=pv[0]).time, pv[0]))
        return [codec.decode_value(t.params[0], v) for _, v in ordered]
    if t.name == "set":
        keys = [codec.decode_value(t.params[0], p) for p, _ in cells]
        return sorted(keys, key=_sortable)
    if t.name == "map":
        pairs = [(codec.decode_value(t.params[0], p), codec.decode_value(t.params[1], v))
                 for p, v in cells]
        return dict(sorted(pairs, key=lambda kv: _sortable(kv[0])))
    if t.name == "udt":
        fields: dict[str, Any] = {}
        for p, v in cells:
            (i,) = struct.unpack(">h", p)
            if 0 <= i < len(t.field_names):
                fields[t.field_names[i]] = codec.decode_value(t.params[i], v)
        return fields
    raise TypeError(f"{column.name}: {t.cql()} has no cells")


def _sortable(v: Any) -> Any:
    return (0, v) if isinstance(v, int | float | str | bytes) else (1, repr(v))
