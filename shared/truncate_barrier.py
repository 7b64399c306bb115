"""The truncate-barrier record: what the materializer's driver writes to every partition of
the raw topic once every partition's store has applied a truncation of a table and the
table's truncate events (`op: t`) are in every partition of its event topic, in the same
transaction as those events. The task that meets it writes the table's live rows again
(`op: r`), so whatever a consumer's truncate removed of rows written after the truncation
comes back after it (docs/architecture.md "TRUNCATE").

Layout: a leading byte 5 (a heartbeat's is 0, a table-dropped record's 2, a
table-truncated record's 3, a RowUpdate's its format version, 4), then JSON with the
table id and name and the truncation floor (µs) the truncate events stand for. The key is
the table id's 16 bytes.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass

TRUNCATE_BARRIER_BYTE = 5


@dataclass(frozen=True)
class TruncateBarrier:
    """A table's truncate events are written: its live rows go out again after them."""

    table_id: uuid.UUID
    keyspace: str
    table: str
    floor_us: int  # the truncation floor the truncate events stand for

    @property
    def name(self) -> str:
        """keyspace.table"""
        return f"{self.keyspace}.{self.table}"


def is_truncate_barrier(value: bytes | None) -> bool:
    """Whether a raw-topic value is a truncate-barrier record."""
    return bool(value) and value[0] == TRUNCATE_BARRIER_BYTE  # type: ignore[index]


def encode_truncate_barrier(barrier: TruncateBarrier) -> bytes:
    """The raw-topic value of a truncate-barrier record (its key: the table id's bytes)."""
    body = {"table_id": str(barrier.table_id), "keyspace": barrier.keyspace,
            "table": barrier.table, "floor_us": barrier.floor_us}
    return bytes([TRUNCATE_BARRIER_BYTE]) + json.dumps(body, sort_keys=True).encode()


def decode_truncate_barrier(value: bytes) -> TruncateBarrier:
    """A truncate-barrier record from its raw-topic value (ValueError, KeyError or TypeError
    if it is not one, or is damaged)."""
    if not is_truncate_barrier(value):
        raise ValueError("not a truncate-barrier record")
    body = json.loads(value[1:])
    return TruncateBarrier(uuid.UUID(body["table_id"]), str(body["keyspace"]),
                           str(body["table"]), int(body["floor_us"]))
