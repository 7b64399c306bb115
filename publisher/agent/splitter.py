"""Split a decoded mutation into single-row RowUpdate records (docs/architecture.md
"Publisher"). Pure logic."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from publisher.commitlog.model import (
    EXCL_END_INCL_START_BOUNDARY,
    INCL_END_BOUND,
    INCL_END_EXCL_START_BOUNDARY,
    INCL_START_BOUND,
    DeletionTime,
    Mutation,
    PartitionUpdate,
    RangeTombstoneMarker,
    Row,
)
from shared.schema import TableSchema


@dataclass(frozen=True)
class SourceInfo:
    """Where records come from: this node and the segment being read."""

    host: str
    datacenter: str
    file: str
    segment_id: int
    commitlog_version: int
    messaging_version: int


def split(mutation: Mutation, source: SourceInfo,
          schema_hash: Callable[[TableSchema], str]) -> list[tuple[PartitionUpdate,
                                                                  dict[str, Any]]]:
    """(update, RowUpdate dict) for every row, static row, partition deletion and range
    tombstone of `mutation`; `schema_hash` gives a table's schema hash."""
    out: list[tuple[PartitionUpdate, dict[str, Any]]] = []
    index = 0
    for update in mutation.updates:
        base = {
            "table_id": update.table.id.bytes, "keyspace": update.table.keyspace,
            "table": update.table.table, "schema_hash": schema_hash(update.table),
            "partition_key": update.partition_key,
        }
        records: list[dict[str, Any]] = []
        if update.partition_deletion is not None:
            records.append(_record("PARTITION_DELETION",
                                   deletion=_deletion(update.partition_deletion)))
        if update.static_row is not None:
            records.append(_row(update.static_row, "STATIC_ROW"))
        records.extend(range_records(update.markers))
        records.extend(_row(row, "ROW") for row in update.rows)
        for record in records:
            record.update(base)
            record["source"] = {
                "host": source.host, "datacenter": source.datacenter, "file": source.file,
                "segment_id": source.segment_id, "position": mutation.position,
                "index": index, "commitlog_version": source.commitlog_version,
                "messaging_version": source.messaging_version,
            }
            index += 1
            out.append((update, record))
    return out


def _record(kind: str, **fields: Any) -> dict[str, Any]:
    """A RowUpdate body with every field present (the Avro defaults where not given)."""
    return {"kind": kind, "clustering": [], "deletion": None, "shadowable": False,
            "range": None, "liveness": None, "cells": [], "complex_deletions": []} | fields


def _deletion(d: DeletionTime) -> dict[str, Any]:
    return {"marked_for_delete_at": d.marked_for_delete_at,
            "local_deletion_time": d.local_deletion_time}


def _row(row: Row, kind: str) -> dict[str, Any]:
    liveness = None
    if row.liveness is not None:
        liveness = {"timestamp": row.liveness.timestamp, "ttl": row.liveness.ttl,
                    "local_expiration_time": row.liveness.local_expiration_time}
    return _record(
        kind, clustering=list(row.clustering),
        deletion=_deletion(row.deletion) if row.deletion is not None else None,
        shadowable=row.shadowable, liveness=liveness,
        cells=[{"column": c.column.name, "path": c.path,
                   "value": None if c.tombstone else c.value, "timestamp": c.timestamp,
                   "ttl": c.ttl, "local_deletion_time": c.local_deletion_time,
                   "tombstone": c.tombstone} for c in row.cells],
        complex_deletions=[{"column": name, "marked_for_delete_at": d.marked_for_delete_at,
                            "local_deletion_time": d.local_deletion_time}
                           for name, d in row.complex_deletions.items()],
    )


def range_records(markers: list[RangeTombstoneMarker]) -> list[dict[str, Any]]:
    """Pair open and close markers (boundaries do both) into RANGE_TOMBSTONE records."""
    out = []
    opened: RangeTombstoneMarker | None = None
    for m in markers:
        if m.end_deletion is not None and opened is not None:
            assert opened.start_deletion is not None
            out.append(_record(
                "RANGE_TOMBSTONE", deletion=_deletion(opened.start_deletion),
                range={
                    "start": list(opened.values),
                    "start_inclusive": opened.kind in (INCL_START_BOUND,
                                                       EXCL_END_INCL_START_BOUNDARY),
                    "end": list(m.values),
                    "end_inclusive": m.kind in (INCL_END_BOUND, INCL_END_EXCL_START_BOUNDARY),
                }))
            opened = None
        if m.start_deletion is not None:
            opened = m
    return out
