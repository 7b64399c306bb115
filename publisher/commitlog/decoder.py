"""Mutation bytes (messaging version 12 or 13) → PartitionUpdates, rows, cells, markers.

Pure logic, no I/O: `MutationDecoder(schemas).decode(payload, messaging_version)`. The layout
follows Cassandra's MutationSerializer, PartitionUpdate and UnfilteredSerializer (their
sources are the reference); the small encodings it is built of are in
`primitives` (imported under private aliases: the decoder's locals are named cell,
clustering, deletion). The hot path is written flat on purpose (local variables, no
per-field helper objects): it decodes every row of every segment.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from types import MappingProxyType

from publisher.commitlog.errors import (
    DecodeError,
    UnknownColumnError,
    UnknownTableError,
    UnsupportedTypeError,
)
from publisher.commitlog.model import (
    EXCL_END_INCL_START_BOUNDARY,
    INCL_END_EXCL_START_BOUNDARY,
    Cell,
    DeletionTime,
    Liveness,
    Mutation,
    PartitionUpdate,
    RangeTombstoneMarker,
    Row,
)
from publisher.commitlog.primitives import CELL_ROW_TS as _CELL_ROW_TS
from publisher.commitlog.primitives import LIVE_MARKED_FOR_DELETE_AT
from publisher.commitlog.primitives import S64 as _S64
from publisher.commitlog.primitives import U64 as _U64
from publisher.commitlog.primitives import cell as _cell
from publisher.commitlog.primitives import clustering as _clustering
from publisher.commitlog.primitives import deletion as _deletion
from publisher.commitlog.primitives import encoding_stats as _encoding_stats
from publisher.commitlog.primitives import local_time as _ldt
from publisher.commitlog.primitives import s32 as _s32
from publisher.commitlog.primitives import subset as _subset
from publisher.commitlog.primitives import uvint as _uvint
from shared.schema import ColumnSchema, TableSchema

# partition flags
_IS_EMPTY, _HAS_PARTITION_DELETION, _HAS_STATIC_ROW, _HAS_ROW_ESTIMATE = 0x01, 0x04, 0x08, 0x10
# row flags
_END_OF_PARTITION, _IS_MARKER, _HAS_TIMESTAMP, _HAS_TTL = 0x01, 0x02, 0x04, 0x08
_HAS_DELETION, _HAS_ALL_COLUMNS, _HAS_COMPLEX_DELETION, _EXTENSION = 0x10, 0x20, 0x40, 0x80
_IS_STATIC, _HAS_SHADOWABLE_DELETION = 0x01, 0x02

_NONE: Mapping[str, DeletionTime] = MappingProxyType({})


SchemaLookup = Callable[[uuid.UUID], TableSchema | None]


class _Col:
    """A header column resolved against the schema, with what decoding needs at hand."""

    __slots__ = ("complex", "fixed", "schema")

    def __init__(self, schema: ColumnSchema) -> None:
        self.schema = schema
        self.complex = schema.type.is_multicell
        # Non-frozen collection/UDT cell values are always length-prefixed.
        self.fixed = -1 if self.complex else schema.type.fixed_length


class _Table:
    """Per-table decoding state, built once per table id."""

    __slots__ = ("by_name", "clustering_fixed", "headers", "schema")

    def __init__(self, schema: TableSchema) -> None:
        self.schema = schema
        self.by_name: dict[bytes, _Col] = {}
        self.clustering_fixed = [c.type.fixed_length for c in schema.clustering]
        # Column-list headers seen before, as (raw bytes, resolved columns): most updates of
        # a table repeat one of a few, and a prefix check is far cheaper than re-parsing.
        self.headers: list[tuple[bytes, list[_Col]]] = []

    def column(self, name: bytes) -> _Col:
        col = self.by_name.get(name)
        if col is None:
            text = name.decode("utf-8", "replace")
            found = self.schema.column(text)
            if found is None:
                raise DecodeError(f"table {self.schema.name} has no column {text!r} "
                                  f"(nor a dropped one of that name)", UnknownColumnError)
            if found.type.name == "unsupported":
                raise DecodeError(f"column {self.schema.name}.{text}: {found.type.udt_name}",
                                  UnsupportedTypeError)
            col = self.by_name[name] = _Col(found)
        return col


class MutationDecoder:
    """Decodes mutations, resolving table ids through `lookup` (cached per table id)."""

    def __init__(self, lookup: SchemaLookup) -> None:
        self._lookup = lookup
        self._tables: dict[bytes, _Table] = {}
        self._unknown: dict[bytes, str] = {}  # ids the lookup did not know, until forget()

    def forget(self) -> None:
        """Drop cached table layouts and unknown ids (after a schema refresh)."""
        self._tables.clear()
        self._unknown.clear()

    def cached_table(self, raw_id: bytes) -> TableSchema | None:
        """The schema of a table id already met (no lookup), or None."""
        table = self._tables.get(raw_id)
        return table.schema if table is not None else None

    def _table(self, raw_id: bytes) -> _Table:
        table = self._tables.get(raw_id)
        if table is None:
            known_unknown = self._unknown.get(raw_id)
            if known_unknown is not None:
                raise DecodeError(f"unknown table id {known_unknown}", UnknownTableError,
                                  table_id=known_unknown)
            table_id = uuid.UUID(bytes=raw_id)
            schema = self._lookup(table_id)
            if schema is None:
                self._unknown[raw_id] = str(table_id)
                raise DecodeError(f"unknown table id {table_id}", UnknownTableError,
                                  table_id=str(table_id))
            table = self._tables[raw_id] = _Table(schema)
        return table

    def decode(self, buf: bytes, messaging_version: int) -> Mutation:
        """Decode one serialized Mutation; DecodeError says what is wrong."""
        try:
            return self._decode(buf, messaging_version == 13)
        except DecodeError:
            raise
        except (IndexError, ValueError, UnicodeDecodeError) as exc:
            raise DecodeError(f"mutation truncated or malformed: {exc}") from exc

    # ---- the wire format ------------------------------------------------------------------
    def _decode(self, buf: bytes, unsigned_ldt: bool) -> Mutation:
        n = len(buf)
        count = buf[0]
        if count < 0x80:
            p = 1
        else:
            count, p = _uvint(buf, 0)
        if count == 1:  # the common case, without the cross-update checks
            update, p = self._partition_update(buf, p, n, unsigned_ldt)
            if p != n:
                raise DecodeError(f"{n - p} bytes left after the last partition update")
            return Mutation(update.table.keyspace, update.partition_key, [update])
        if count <= 0 or count > n:
            raise DecodeError(f"bad partition update count {count}")
        updates: list[PartitionUpdate] = []
        key = b""
        for _ in range(count):
            update, p = self._partition_update(buf, p, n, unsigned_ldt)
            if updates and update.partition_key != key:
                raise DecodeError("partition updates of one mutation disagree on the key")
            key = update.partition_key
            updates.append(update)
        if p != n:
            raise DecodeError(f"{n - p} bytes left after the last partition update")
        keyspace = updates[0].table.keyspace
        if any(u.table.keyspace != keyspace for u in updates):
            raise DecodeError("partition updates of one mutation span keyspaces")
        return Mutation(keyspace, key, updates)

    def _partition_update(self, buf: bytes, p: int, n: int,
                          unsigned_ldt: bool) -> tuple[PartitionUpdate, int]:
        if p + 16 > n:
            raise DecodeError("truncated table id")
        raw_id = buf[p:p + 16]
        table = self._tables.get(raw_id) or self._table(raw_id)
        klen = buf[p + 16]
        if klen < 0x80:
            p += 17
        else:
            klen, p = _uvint(buf, p + 16)
        if p + klen > n:
            raise DecodeError("partition key runs past the end of the mutation")
        key = buf[p:p + klen]
        p += klen
        flags = buf[p]
        p += 1
        if flags & _IS_EMPTY:
            return PartitionUpdate(table.schema, key, None, None, [], []), p
        ctx, p = _encoding_stats(buf, p, unsigned_ldt)

        statics: list[_Col] = []
        if flags & _HAS_STATIC_ROW:
            statics, p = self._columns(table, buf, p)
        regulars, p = self._columns(table, buf, p)
        pdel = None
        if flags & _HAS_PARTITION_DELETION:
            pdel, p = _deletion(buf, p, ctx)
        static_row = None
        if flags & _HAS_STATIC_ROW:
            rflags = buf[p]
            if not rflags & _EXTENSION or not buf[p + 1] & _IS_STATIC:
                raise DecodeError("static row without the static flag")
            static_row, p = self._row(table, buf, p + 2, n, rflags, buf[p + 1], statics, ctx,
                                      True)
        if flags & _HAS_ROW_ESTIMATE:
            if buf[p] < 0x80:
                p += 1
            else:
                _, p = _uvint(buf, p)
        markers: list[RangeTombstoneMarker] = []
        unfiltered: list[Row | RangeTombstoneMarker] = []  # the rows, unless there are markers
        while True:
            rflags = buf[p]
            p += 1
            if rflags & _END_OF_PARTITION:
                break
            ext = 0
            if rflags & _EXTENSION:
                ext = buf[p]
                p += 1
                if ext & _IS_STATIC:
                    raise DecodeError("static row among the clustering rows")
            if rflags & _IS_MARKER:
                marker, p = self._marker(table, buf, p, n, ctx)
                markers.append(marker)
                unfiltered.append(marker)
            else:
                row, p = self._row(table, buf, p, n, rflags, ext, regulars, ctx, False)
                unfiltered.append(row)
        rows = [r for r in unfiltered if r.__class__ is Row] if markers else unfiltered
        return PartitionUpdate(table.schema, key, pdel, static_row, rows, markers, unfiltered), p

    def _columns(self, table: _Table, buf: bytes, p: int) -> tuple[list[_Col], int]:
        for raw, cols in table.headers:
            if buf.startswith(raw, p):
                return cols, p + len(raw)
        start = p
        count, p = _uvint(buf, p)
        cols = []
        column = table.column
        for _ in range(count):
            ln, p = _uvint(buf, p)
            cols.append(column(buf[p:p + ln]))
            p += ln
        if len(table.headers) < 16:
            table.headers.append((buf[start:p], cols))
        return cols, p

    def _row(self, table: _Table, buf: bytes, p: int, n: int, flags: int, ext: int,
             header: list[_Col], ctx: tuple[int, int, int, bool],
             is_static: bool) -> tuple[Row, int]:
        min_ts, min_ldt, min_ttl, unsigned_ldt = ctx
        clustering: tuple[bytes | None, ...] = ()
        if not is_static and table.clustering_fixed:
            clustering, p = _clustering(buf, p, n, table.clustering_fixed)
        liveness = None
        # Without row liveness, a "use the row's timestamp" cell gets Cassandra's NO_TIMESTAMP.
        row_ts = LIVE_MARKED_FOR_DELETE_AT
        row_ttl = 0
        row_exp = None
        if flags & _HAS_TIMESTAMP:
            u = buf[p]
            if u < 0x80:
                p += 1
            else:
                u, p = _uvint(buf, p)
            row_ts = (u + min_ts) & _U64
            if row_ts >= _S64:
                row_ts -= 1 << 64
            if flags & _HAS_TTL:
                u, p = _uvint(buf, p)
                row_ttl = _s32(u) + min_ttl
                u, p = _uvint(buf, p)
                row_exp = _ldt(_s32(u) + min_ldt, unsigned_ldt)
            liveness = Liveness(row_ts, row_ttl, row_exp)
        deletion = None
        if flags & _HAS_DELETION:
            deletion, p = _deletion(buf, p, ctx)
        if flags & _HAS_ALL_COLUMNS:
            present = header
        else:
            present, p = _subset(buf, p, header)
        cells: list[Cell] = []
        has_complex_deletion = flags & _HAS_COMPLEX_DELETION
        # Most rows have no complex deletion: share one read-only empty mapping.
        complex_deletions: Mapping[str, DeletionTime] = {} if has_complex_deletion else _NONE
        for col in present:
            if not col.complex:
                if buf[p] == _CELL_ROW_TS:
                    # Fast path for the most common cell (an INSERT's): live, the row's
                    # timestamp, no TTL, a value.
                    p += 1
                    length = col.fixed
                    if length < 0:
                        length = buf[p]
                        if length < 0x80:
                            p += 1
                        else:
                            length, p = _uvint(buf, p)
                    end = p + length
                    if end > n:
                        raise DecodeError(f"value of column {col.schema.name} runs past the end")
                    cells.append(Cell(col.schema, None, buf[p:end], row_ts, 0, None, False))
                    p = end
                    continue
                cell, p = _cell(buf, p, n, col, False, min_ts, min_ldt, min_ttl, unsigned_ldt,
                                row_ts, row_ttl, row_exp)
                cells.append(cell)
                continue
            if has_complex_deletion:
                cdel, p = _deletion(buf, p, ctx)
                if cdel.marked_for_delete_at != LIVE_MARKED_FOR_DELETE_AT:
                    complex_deletions[col.schema.name] = cdel  # type: ignore[index]
            count, p = _uvint(buf, p)
            for _ in range(count):
                cell, p = _cell(buf, p, n, col, True, min_ts, min_ldt, min_ttl, unsigned_ldt,
                                row_ts, row_ttl, row_exp)
                cells.append(cell)
        if p > n:
            raise DecodeError("row runs past the end of the mutation")
        return Row(clustering, liveness, deletion, ext & _HAS_SHADOWABLE_DELETION != 0, cells,
                   complex_deletions, is_static), p

    def _marker(self, table: _Table, buf: bytes, p: int, n: int,
                ctx: tuple[int, int, int, bool]) -> tuple[RangeTombstoneMarker, int]:
        kind = buf[p]
        size = (buf[p + 1] << 8) | buf[p + 2]
        p += 3
        if size > len(table.clustering_fixed):
            raise DecodeError(f"range tombstone bound of {size} values, table has "
                              f"{len(table.clustering_fixed)} clustering columns")
        values: tuple[bytes | None, ...] = ()
        if size:
            values, p = _clustering(buf, p, n, table.clustering_fixed[:size])
        if kind in (EXCL_END_INCL_START_BOUNDARY, INCL_END_EXCL_START_BOUNDARY):
            end, p = _deletion(buf, p, ctx)
            start, p = _deletion(buf, p, ctx)
            return RangeTombstoneMarker(kind, values, end, start), p
        if kind in (0, 6):  # EXCL_END_BOUND, INCL_END_BOUND: closes a range
            end, p = _deletion(buf, p, ctx)
            return RangeTombstoneMarker(kind, values, end, None), p
        if kind in (1, 7):  # INCL_START_BOUND, EXCL_START_BOUND: opens a range
            start, p = _deletion(buf, p, ctx)
            return RangeTombstoneMarker(kind, values, None, start), p
        raise DecodeError(f"invalid range tombstone bound kind {kind}")
