"""Raw Cassandra-serialized bytes → Python values, through cassandra-driver's type codecs.

Used for display (`publisher dump`) and by the materializer. Values are in the form the
driver returns them (int, str, Decimal, UUID, datetime, SortedSet, OrderedMap, ...); the
commit log specifics (partition key composites, clustering prefixes, cell paths of
non-frozen collections and UDTs, counter contexts) are handled here.
"""

from __future__ import annotations

import struct
import uuid
from functools import lru_cache
from typing import Any

from cassandra import cqltypes

from shared.cqltype import MARSHAL_CLASSES, CqlType
from shared.schema import ColumnSchema, TableSchema

PROTOCOL_VERSION = 5
# CQL name → the driver's marshal class name; where several Java classes map to one CQL
# type, the current class wins.
_MARSHAL = {cql: cls for cls, cql in MARSHAL_CLASSES.items()} | {
    "timestamp": "TimestampType", "uuid": "UUIDType"}


@lru_cache(maxsize=4096)
def _driver_type(t: CqlType) -> Any:
    """The cassandra-driver type class that (de)serializes values of `t`."""
    if t.name in _MARSHAL:
        return cqltypes.lookup_casstype(_MARSHAL[t.name])
    params = [_driver_type(p) for p in t.params]
    if t.name == "udt":
        return cqltypes.UserType.make_udt_class(t.keyspace, t.udt_name, list(t.field_names),
                                                params)
    if t.name == "vector":
        return cqltypes.VectorType.apply_parameters([params[0], t.dimension], None)
    classes = {"list": cqltypes.ListType, "set": cqltypes.SetType, "map": cqltypes.MapType,
               "tuple": cqltypes.TupleType}
    if t.name not in classes:
        raise TypeError(f"no codec for CQL type {t.cql()}")
    return classes[t.name].apply_parameters(params, None)


def decode_value(t: CqlType, raw: bytes | None) -> Any:
    """One serialized value of type `t` (a frozen value: whole collections, tuples, UDTs)."""
    if raw is None:
        return None
    if t.name == "counter":
        return counter_total(raw)
    if not raw and t.name not in ("text", "ascii", "blob"):
        return None  # an empty value (e.g. blobAsInt(0x)): no value of the type
    try:
        return _driver_type(t).from_binary(raw, PROTOCOL_VERSION)
    except OverflowError:
        if t.name == "timestamp" and len(raw) == 8:
            # Beyond Python's datetime range (system tables store such sentinels): ms.
            return int.from_bytes(raw, "big", signed=True)
        raise


def split_partition_key(table: TableSchema, key: bytes) -> list[bytes]:
    """The raw component values of a partition key (CompositeType when it has several)."""
    columns = table.partition_key
    if len(columns) <= 1:
        return [key]
    parts = []
    p = 0
    while p < len(key):
        (length,) = struct.unpack_from(">H", key, p)
        parts.append(key[p + 2:p + 2 + length])
        p += 3 + length  # value, then the end-of-component byte
    if len(parts) != len(columns):
        raise ValueError(f"{table.name}: partition key has {len(parts)} components, "
                         f"expected {len(columns)}")
    return parts


def decode_partition_key(table: TableSchema, key: bytes) -> dict[str, Any]:
    """Partition key column → value."""
    parts = split_partition_key(table, key)
    return {c.name: decode_value(c.type, v) for c, v in zip(table.partition_key, parts,
                                                             strict=True)}


def decode_clustering(table: TableSchema, values: tuple[bytes | None, ...]) -> dict[str, Any]:
    """Clustering column → value for a row clustering or a (shorter) bound prefix."""
    return {c.name: decode_value(c.type, v) for c, v in zip(table.clustering, values,
                                                             strict=False)}


def decode_cell_path(column: ColumnSchema, path: bytes) -> Any:
    """What a cell path addresses: list element id (timeuuid), set element, map key, UDT field."""
    t = column.type
    if t.name == "list":
        return uuid.UUID(bytes=path)
    if t.name in ("set", "map"):
        return decode_value(t.params[0], path)
    if t.name == "udt":
        (index,) = struct.unpack(">h", path)
        return t.field_names[index] if 0 <= index < len(t.field_names) else index
    raise TypeError(f"column {column.name} of type {t.cql()} has no cell paths")


def decode_cell_value(column: ColumnSchema, path: bytes | None, raw: bytes) -> Any:
    """A cell's value: the whole value of a simple column, or one element/field's value."""
    t = column.type
    if path is None:
        return decode_value(t, raw)
    if t.name == "list":
        return decode_value(t.params[0], raw)
    if t.name == "set":
        return None  # set elements live in the path; the value is empty
    if t.name == "map":
        return decode_value(t.params[1], raw)
    if t.name == "udt":
        (index,) = struct.unpack(">h", path)
        if 0 <= index < len(t.params):
            return decode_value(t.params[index], raw)
        return raw
    raise TypeError(f"column {column.name} of type {t.cql()} has no cell paths")


def counter_shards(context: bytes) -> list[dict[str, Any]]:
    """A counter context's shards: counter id, logical clock, count, and the shard kind."""
    (n,) = struct.unpack_from(">h", context, 0)
    n = abs(n)
    header = struct.unpack_from(f">{n}h", context, 2) if n else ()
    kinds = {}
    for h in header:
        if h < 0:
            kinds[h + 32768] = "global"
        else:
            kinds[h] = "local"
    body = 2 + 2 * n
    shards = []
    for i, p in enumerate(range(body, len(context), 32)):
        cid, clock, count = struct.unpack_from(">16sqq", context, p)
        shards.append({"counter_id": str(uuid.UUID(bytes=cid)), "clock": clock,
                       "count": count, "kind": kinds.get(i, "remote")})
    return shards


def counter_total(context: bytes) -> int:
    """The sum of a counter context's shard counts (this node's view of the counter)."""
    return sum(s["count"] for s in counter_shards(context))


def encode_value(t: CqlType, value: Any) -> bytes:
    """A driver-side Python value of type `t` in Cassandra's serialized form (snapshots)."""
    return _driver_type(t).to_binary(value, PROTOCOL_VERSION)


def encode_partition_key(table: TableSchema, parts: list[bytes]) -> bytes:
    """Raw component values → the partition key bytes (CompositeType when several)."""
    if len(parts) == 1:
        return parts[0]
    return b"".join(struct.pack(">H", len(p)) + p + b"\x00" for p in parts)
