"""The reference splitter: a decoded mutation as RowUpdate dicts, one a record (test code
only).

The publisher writes its records' bytes straight from the decoder's objects
(`publisher.agent.record_writer.RecordWriter`); these dicts, encoded by the reference codec
(support.rowupdate_reference), are what a unit test holds those bytes to
(tests/unit/publisher/agent/test_records.py). Range tombstones are paired by the runtime's
own `range_records`, which the writer shares.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from publisher.agent.record_writer import SourceInfo, range_records
from publisher.commitlog.model import DeletionTime, Mutation, PartitionUpdate, Row
from shared.schema import TableSchema


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
