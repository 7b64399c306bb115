"""Decoded partition updates → encoded RowUpdate values, without the dict step
(docs/architecture.md "Publisher"). Pure logic.

Written straight from the decoder's objects, the publisher's hot path; the same bytes as
the tests' reference, which splits into dicts and encodes them with fastavro
(tests/support/splitter_reference.py, tests/support/rowupdate_reference.py; a unit test
holds the two equal).

Each record is one `b"".join` over a flat list of pieces; the pieces that repeat (a column's
name with the null path and the value's union branch, a row's timestamp with the default
ttl / deletion time / tombstone of a plain live cell) are encoded once, not per cell.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from hashlib import blake2b
from typing import Any

from publisher.commitlog.model import (
    EXCL_END_INCL_START_BOUNDARY,
    INCL_END_BOUND,
    INCL_END_EXCL_START_BOUNDARY,
    INCL_START_BOUND,
    Cell,
    DeletionTime,
    Mutation,
    PartitionUpdate,
    RangeTombstoneMarker,
    Row,
)
from shared.rowupdate import (
    DIGEST_SIZE,
    FALSE,
    KIND,
    MIN_TS,
    NULL,
    SMALL_LIMIT,
    SMALL_LONGS,
    SOME,
    TRUE,
    VERSION_BYTE,
    avro_long,
    avro_opt_long,
    avro_string,
    avro_values,
    mutation_id,
)
from shared.schema import TableSchema

_EMPTY_ARRAY = b"\x00"
_NO_RANGE = NULL
_ROW, _STATIC_ROW = KIND["ROW"], KIND["STATIC_ROW"]
# deletion null, shadowable false, range null: a row without a row deletion
_UNDELETED = NULL + FALSE + _NO_RANGE
# ttl 0, local_expiration_time null: liveness of a row written without TTL
_NO_TTL = avro_long(0) + NULL
# ttl 0, local_deletion_time null, tombstone false: the tail of a plain live cell
_LIVE_TAIL = avro_long(0) + NULL + FALSE


@dataclass(frozen=True)
class SourceInfo:
    """Where records come from: this node and the segment being read."""

    host: str
    datacenter: str
    file: str
    segment_id: int
    commitlog_version: int
    messaging_version: int


class RecordWriter:
    """Encodes the records of mutations from one segment; caches per-table prefixes."""

    def __init__(self, source: SourceInfo, schema_hash: Callable[[TableSchema], str]) -> None:
        self.source = source
        self.schema_hash = schema_hash
        self._prefix: dict[int, tuple[TableSchema, bytes]] = {}
        # column name → its Avro string + null path + the value branch of a live cell
        self._cell_heads: dict[str, bytes] = {}
        self._source_head = (avro_string(source.host) + avro_string(source.datacenter)
                             + avro_string(source.file) + avro_long(source.segment_id))
        self._source_tail = (avro_long(source.commitlog_version)
                             + avro_long(source.messaging_version))

    def records(self, mutation: Mutation) -> list[tuple[PartitionUpdate, bytes]]:
        """(update, raw-topic value) for each record of `mutation`, in split order."""
        out: list[tuple[PartitionUpdate, bytes]] = []
        index = 0
        position = avro_long(mutation.position)
        head, tail = self._source_head, self._source_tail
        row_into = self._row_into
        prefixes = self._prefix
        for update in mutation.updates:
            table = update.table
            entry = prefixes.get(id(table))
            prefix = entry[1] if entry is not None and entry[0] is table \
                else self._table_prefix(table)
            key = update.partition_key
            size = len(key)
            key_size = SMALL_LONGS[size + size] if size < SMALL_LIMIT else avro_long(size)
            contents: list[bytes] = []
            newest = MIN_TS  # of the update's records: the first half of its mutation id
            if (update.partition_deletion is not None or update.static_row is not None
                    or update.markers):
                bodies: list[bytes] = []
                if update.partition_deletion is not None:
                    newest = update.partition_deletion.marked_for_delete_at
                    bodies.append(_EMPTY_ARRAY + KIND["PARTITION_DELETION"]
                                  + _deletion(update.partition_deletion) + FALSE + _NO_RANGE
                                  + NULL + _EMPTY_ARRAY + _EMPTY_ARRAY)
                if update.static_row is not None:
                    parts: list[bytes] = []
                    newest = max(newest, row_into(parts, update.static_row, _STATIC_ROW))
                    bodies.append(b"".join(parts))
                if update.markers:
                    for rec in range_records(update.markers):
                        newest = max(newest, rec["deletion"]["marked_for_delete_at"])
                        bodies.append(_range_body(rec))
                contents += [b"".join((prefix, key_size, key, body)) for body in bodies]
            for row in update.rows:  # the common case: one list, one join per record
                parts = [prefix, key_size, key]
                ts = row_into(parts, row, _ROW)
                newest = ts if ts > newest else newest
                contents.append(b"".join(parts))
            # the copy digests first: the mutation id is the newest time + a digest of them
            digests = [blake2b(c, digest_size=DIGEST_SIZE).digest() for c in contents]
            mid = mutation_id(digests, newest)
            for content, digest in zip(contents, digests, strict=True):
                out.append((update, b"".join((
                    VERSION_BYTE, digest, mid, content, head, position,
                    SMALL_LONGS[index + index] if index < SMALL_LIMIT else avro_long(index),
                    tail))))
                index += 1
        return out

    def _table_prefix(self, table: TableSchema) -> bytes:
        """Table id, keyspace, table, schema hash: the Avro record's first fields."""
        entry = self._prefix.get(id(table))
        if entry is None or entry[0] is not table:
            raw = (table.id.bytes + avro_string(table.keyspace)
                   + avro_string(table.table) + avro_string(self.schema_hash(table)))
            entry = self._prefix[id(table)] = (table, raw)
        return entry[1]

    def _row_into(self, parts: list[bytes], row: Row, kind: bytes) -> int:
        """Append the RowUpdate fields from `clustering` to `complex_deletions` of `row`;
        returns its newest write time (as `rowupdate.record_timestamp`)."""
        clustering = row.clustering
        parts.append(avro_values(clustering) if clustering else _EMPTY_ARRAY)
        parts.append(kind)
        newest = MIN_TS if row.deletion is None else row.deletion.marked_for_delete_at
        if row.deletion is None and not row.shadowable:
            parts.append(_UNDELETED)
        else:
            parts += (_deletion(row.deletion), TRUE if row.shadowable else FALSE, _NO_RANGE)
        live = row.liveness
        last_ts: int | None = None
        ts_enc = ts_tail = b""
        if live is None:
            parts.append(NULL)
        else:
            last_ts = live.timestamp
            newest = max(newest, last_ts)
            ts_enc = avro_long(last_ts)
            ts_tail = ts_enc + _LIVE_TAIL
            if live.ttl == 0 and live.local_expiration_time is None:
                parts += (SOME, ts_enc, _NO_TTL)
            else:
                parts += (SOME, ts_enc, avro_long(live.ttl),
                          avro_opt_long(live.local_expiration_time))
        cells = row.cells
        if cells:
            parts.append(avro_long(len(cells)))
            heads = self._cell_heads
            small, limit = SMALL_LONGS, SMALL_LIMIT
            for c in cells:
                ts = c.timestamp
                if ts != last_ts:  # the cells of a row usually share the row's timestamp
                    last_ts = ts
                    newest = ts if ts > newest else newest
                    ts_enc = avro_long(ts)
                    ts_tail = ts_enc + _LIVE_TAIL
                if (c.path is None and c.ttl == 0 and c.local_deletion_time is None
                        and not c.tombstone):
                    name = c.column.name
                    cell_head = heads.get(name)
                    if cell_head is None:
                        cell_head = heads[name] = avro_string(name) + NULL + SOME
                    value = c.value
                    size = len(value)
                    parts += (cell_head, small[size + size] if size < limit else avro_long(size),
                              value, ts_tail)
                else:
                    parts.append(_cell(c, ts_enc))
        parts.append(_EMPTY_ARRAY)
        if row.complex_deletions:
            parts.append(avro_long(len(row.complex_deletions)))
            for name, d in row.complex_deletions.items():
                newest = max(newest, d.marked_for_delete_at)
                parts += (avro_string(name), avro_long(d.marked_for_delete_at),
                          avro_opt_long(d.local_deletion_time))
        parts.append(_EMPTY_ARRAY)
        return newest


def _deletion(d: DeletionTime | None) -> bytes:
    if d is None:
        return NULL
    return SOME + avro_long(d.marked_for_delete_at) + avro_opt_long(d.local_deletion_time)


def _cell(c: Cell, ts_enc: bytes) -> bytes:
    """Any cell (path, tombstone, TTL); `ts_enc` is its timestamp, encoded."""
    path = c.path
    value = None if c.tombstone else c.value
    return b"".join((
        avro_string(c.column.name),
        NULL if path is None else SOME + avro_long(len(path)) + path,
        NULL if value is None else SOME + avro_long(len(value)) + value,
        ts_enc, avro_long(c.ttl), avro_opt_long(c.local_deletion_time),
        TRUE if c.tombstone else FALSE))


def _range_body(rec: dict) -> bytes:
    rng = rec["range"]
    d = rec["deletion"]
    return b"".join((
        _EMPTY_ARRAY, KIND["RANGE_TOMBSTONE"],
        SOME + avro_long(d["marked_for_delete_at"]) + avro_opt_long(d["local_deletion_time"]),
        FALSE, SOME, avro_values(rng["start"]), TRUE if rng["start_inclusive"] else FALSE,
        avro_values(rng["end"]), TRUE if rng["end_inclusive"] else FALSE,
        NULL, _EMPTY_ARRAY, _EMPTY_ARRAY))


def range_records(markers: list[RangeTombstoneMarker]) -> list[dict[str, Any]]:
    """Pair open and close markers (boundaries do both) into RANGE_TOMBSTONE records."""
    out = []
    opened: RangeTombstoneMarker | None = None
    for m in markers:
        if m.end_deletion is not None and opened is not None:
            d = opened.start_deletion
            assert d is not None
            out.append({
                "kind": "RANGE_TOMBSTONE", "clustering": [],
                "deletion": {"marked_for_delete_at": d.marked_for_delete_at,
                             "local_deletion_time": d.local_deletion_time},
                "shadowable": False,
                "range": {
                    "start": list(opened.values),
                    "start_inclusive": opened.kind in (INCL_START_BOUND,
                                                       EXCL_END_INCL_START_BOUNDARY),
                    "end": list(m.values),
                    "end_inclusive": m.kind in (INCL_END_BOUND, INCL_END_EXCL_START_BOUNDARY),
                },
                "liveness": None, "cells": [], "complex_deletions": []})
            opened = None
        if m.start_deletion is not None:
            opened = m
    return out
