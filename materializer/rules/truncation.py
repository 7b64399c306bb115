"""A TRUNCATE in the merge's terms: the removal of every cell of the table written at or
before the truncation time, which is what a partition deletion at that time does to one
partition (docs/architecture.md "TRUNCATE").

Why write times and not arrival: Cassandra removes what each replica held when it truncated,
but the replicas' copies of a write are merged here as one, whichever replica's copy comes
first, so only what the copies share can decide, and the same way on every replay: their
write time. The two agree for every write that is not concurrent with the TRUNCATE (or
stamped with a time before it by USING TIMESTAMP or a client clock behind).
"""

from __future__ import annotations

from typing import Any

from shared.rowupdate import record_timestamp
from shared.table_truncate import TableTruncate


def covered(rec: dict[str, Any], floor_us: int) -> bool:
    """Whether every write a RowUpdate carries is at or before a truncation floor (it can
    change nothing the truncation left)."""
    return record_timestamp(rec) <= floor_us


def floor_deletion(floor_us: int, at_s: int | None = None) -> dict[str, Any]:
    """The partition deletion a floor amounts to, as much of a RowUpdate as the merge reads
    of one (`at_s`: when it was made, if not the floor's own time)."""
    return {"kind": "PARTITION_DELETION",
            "deletion": {"marked_for_delete_at": floor_us,
                         "local_deletion_time": floor_us // 1_000_000 if at_s is None
                         else at_s}}


def truncation_record(truncate: TableTruncate, schema_hash: str, partition_key: bytes
                      ) -> dict[str, Any]:
    """The RowUpdate that removes, in one partition of the table, what `truncate` removed:
    a partition deletion at the truncation time (over every cell for a reset), sourced at
    the node's truncation (its commit log position; file "truncate")."""
    return {
        "table_id": truncate.table_id.bytes, "keyspace": truncate.keyspace,
        "table": truncate.table, "schema_hash": schema_hash, "partition_key": partition_key,
        "clustering": [], "shadowable": False, "range": None, "liveness": None, "cells": [],
        "complex_deletions": [], **floor_deletion(truncate.removes_up_to_us,
                                                     truncate.truncated_at_ms // 1000),
        "source": {"host": truncate.host, "datacenter": truncate.datacenter, "file": "truncate",
                   "segment_id": truncate.segment_id, "position": truncate.position,
                   "index": 0, "commitlog_version": 0, "messaging_version": 0}}
