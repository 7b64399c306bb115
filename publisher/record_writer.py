"""Decoded partition updates → encoded RowUpdate values, without the dict step.

The same records as `splitter.split` + `rowupdate.encode`, byte for byte (a unit test holds
them to it), written straight from the decoder's objects: the publisher's hot path.
"""

from __future__ import annotations

from collections.abc import Callable

from publisher.commitlog.model import Cell, DeletionTime, Mutation, PartitionUpdate, Row
from publisher.splitter import SourceInfo, range_records
from shared.rowupdate import (
    FALSE,
    KIND,
    NULL,
    SOME,
    TRUE,
    avro_long,
    avro_opt_long,
    avro_string,
    avro_values,
)
from shared.schema import TableSchema

_EMPTY_ARRAY = b"\x00"
_NO_RANGE = NULL


class RecordWriter:
    """Encodes the records of mutations from one segment; caches per-table prefixes."""

    def __init__(self, source: SourceInfo, schema_hash: Callable[[TableSchema], str]) -> None:
        self.source = source
        self.schema_hash = schema_hash
        self._prefix: dict[int, tuple[TableSchema, bytes]] = {}
        self._source_head = (avro_string(source.host) + avro_string(source.datacenter)
                             + avro_string(source.file) + avro_long(source.segment_id))
        self._source_tail = (avro_long(source.commitlog_version)
                             + avro_long(source.messaging_version))

    def records(self, mutation: Mutation) -> list[tuple[PartitionUpdate, bytes]]:
        """(update, encoded RowUpdate) for each record of `mutation`, in split order."""
        out: list[tuple[PartitionUpdate, bytes]] = []
        index = 0
        position = avro_long(mutation.position)
        head, tail = self._source_head, self._source_tail
        for update in mutation.updates:
            prefix = self._table_prefix(update.table) + avro_long(
                len(update.partition_key)) + update.partition_key
            bodies: list[bytes] = []
            if update.partition_deletion is not None:
                bodies.append(_EMPTY_ARRAY + KIND["PARTITION_DELETION"]
                              + _deletion(update.partition_deletion) + FALSE + _NO_RANGE
                              + NULL + _EMPTY_ARRAY + _EMPTY_ARRAY)
            if update.static_row is not None:
                bodies.append(_row(update.static_row, KIND["STATIC_ROW"]))
            if update.markers:
                bodies.extend(_range_body(rec) for rec in range_records(update.markers))
            for row in update.rows:
                bodies.append(_row(row, KIND["ROW"]))
            for body in bodies:
                out.append((update, b"".join((b"\x01", prefix, body, head, position,
                                              avro_long(index), tail))))
                index += 1
        return out

    def _table_prefix(self, table: TableSchema) -> bytes:
        entry = self._prefix.get(id(table))
        if entry is None or entry[0] is not table:
            raw = (table.id.bytes + avro_string(table.keyspace) + avro_string(table.table)
                   + avro_string(self.schema_hash(table)))
            entry = self._prefix[id(table)] = (table, raw)
        return entry[1]


def _deletion(d: DeletionTime | None) -> bytes:
    if d is None:
        return NULL
    return SOME + avro_long(d.marked_for_delete_at) + avro_opt_long(d.local_deletion_time)


def _row(row: Row, kind: bytes) -> bytes:
    parts = [avro_values(row.clustering), kind, _deletion(row.deletion),
             TRUE if row.shadowable else FALSE, _NO_RANGE]
    live = row.liveness
    if live is None:
        parts.append(NULL)
    else:
        parts += [SOME, avro_long(live.timestamp), avro_long(live.ttl),
                  avro_opt_long(live.local_expiration_time)]
    cells = row.cells
    if cells:
        parts.append(avro_long(len(cells)))
        last_ts, last_enc = None, b""
        for c in cells:
            parts.append(_cell(c, last_ts, last_enc))
            if c.timestamp != last_ts:
                last_ts, last_enc = c.timestamp, avro_long(c.timestamp)
    parts.append(_EMPTY_ARRAY)
    if row.complex_deletions:
        parts.append(avro_long(len(row.complex_deletions)))
        for name, d in row.complex_deletions.items():
            parts += [avro_string(name), avro_long(d.marked_for_delete_at),
                      avro_opt_long(d.local_deletion_time)]
    parts.append(_EMPTY_ARRAY)
    return b"".join(parts)


def _cell(c: Cell, last_ts: int | None, last_enc: bytes) -> bytes:
    path = c.path
    value = None if c.tombstone else c.value
    return b"".join((
        avro_string(c.column.name),
        NULL if path is None else SOME + avro_long(len(path)) + path,
        NULL if value is None else SOME + avro_long(len(value)) + value,
        last_enc if c.timestamp == last_ts else avro_long(c.timestamp),
        avro_long(c.ttl), avro_opt_long(c.local_deletion_time),
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
