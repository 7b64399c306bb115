"""Clustering order of a table: is a row inside a range tombstone's bounds?

Values stay raw in the state; comparing them needs each clustering column's CQL order
(and its ASC/DESC). Keys are built from the driver-decoded values, cached per raw value.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Callable
from typing import Any

from shared import codec
from shared.cqltype import CqlType
from shared.schema import TableSchema

Key = tuple[Any, ...]
# Types whose driver-decoded Python values order the way Cassandra orders them.
_DECODED_ORDER = frozenset({"tinyint", "smallint", "int", "bigint", "varint", "decimal",
                            "float", "double", "boolean", "timestamp", "counter"})


class _Desc:
    """Inverts the order of a key component (DESC clustering columns)."""

    __slots__ = ("key",)

    def __init__(self, key: Any) -> None:
        self.key = key

    def __lt__(self, other: _Desc) -> bool:
        return other.key < self.key

    def __gt__(self, other: _Desc) -> bool:
        return other.key > self.key

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Desc) and self.key == other.key

    def __hash__(self) -> int:
        return hash(self.key)


def _component_key(t: CqlType) -> Callable[[bytes | None], Any]:
    def key(raw: bytes | None) -> Any:
        if raw is None or (not raw and t.name not in ("text", "ascii", "blob")):
            return (0,)  # null / empty sorts first, as Cassandra's empty values do
        if t.name not in _DECODED_ORDER and t.name not in ("uuid", "timeuuid"):
            # Byte order is Cassandra's own for text, ascii, blob, inet, date (biased
            # unsigned days) and time; for frozen collections and UDTs an approximation.
            return (1, raw)
        if t.name == "timeuuid":
            u = uuid.UUID(bytes=raw)
            return (1, u.time, raw)
        if t.name == "uuid":
            u = uuid.UUID(bytes=raw)
            return (1, u.version or 0, u.time if u.version == 1 else 0, raw)
        return (1, codec.decode_value(t, raw))

    return functools.lru_cache(maxsize=65536)(key)


class ClusteringOrder:
    """Compares clusterings and bound prefixes of one table."""

    def __init__(self, table: TableSchema) -> None:
        self.components = [(_component_key(c.type), c.clustering_order == "desc")
                           for c in table.clustering]

    def key(self, values: tuple[bytes | None, ...]) -> Key:
        """Sortable key of a clustering or a prefix of one."""
        out = []
        for (fn, desc), raw in zip(self.components, values, strict=False):
            k = fn(raw)
            out.append(_Desc(k) if desc else k)
        return tuple(out)

    def in_range(self, clustering: tuple[bytes | None, ...], start: tuple, start_incl: bool,
                 end: tuple, end_incl: bool) -> bool:
        """Whether a row's clustering lies inside [start, end] (bounds are prefixes)."""
        ck = self.key(clustering)
        return not (_before(ck, self.key(start), start_incl)
                    or _after(ck, self.key(end), end_incl))

    def may_overlap(self, first: tuple[bytes | None, ...], last: tuple[bytes | None, ...],
                    start: tuple, start_incl: bool, end: tuple, end_incl: bool) -> bool:
        """Whether some clustering between `first` and `last` (inclusive) can lie inside
        [start, end]: neither all of them before the start nor all after the end."""
        return not (_before(self.key(last), self.key(start), start_incl)
                    or _after(self.key(first), self.key(end), end_incl))


def _before(ck: Key, lo: Key, incl: bool) -> bool:
    """`ck` sorts before the start bound `lo` (a prefix; empty: no bound)."""
    head = ck[:len(lo)]
    return head < lo or (head == lo and not incl and bool(lo))


def _after(ck: Key, hi: Key, incl: bool) -> bool:
    """`ck` sorts after the end bound `hi` (a prefix; empty: no bound)."""
    head = ck[:len(hi)]
    return head > hi or (head == hi and not incl and bool(hi))
