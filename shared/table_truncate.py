"""The table-truncated record: what a publisher writes to every partition of the raw topic
when its node's `system.local.truncated_at` holds a truncation of a captured table it has
not announced yet, so the materializer removes what the TRUNCATE removed.

Layout: a leading byte 3 (a heartbeat's is 0, a table-dropped record's 2, a RowUpdate's its
format version, 4), then JSON with the table id and name, the publisher's host and
datacenter, and the node's truncation record: the truncation time (the node's clock, ms)
and the commit log position its flush ended at. The key is the table id's 16 bytes. Every
replica's publisher sends one per truncation; the materializer applies the newest time and
takes the others as done (docs/architecture.md "TRUNCATE").

`casscade snapshot --reset` writes the same record with `reset` true and its own clock's
time: the materializer then empties its state of the table whatever the cells' write times,
and raises no floor, so the snapshot's rows that follow (their original write times) and any
later write merge into empty state (docs/operations.md "Resetting one table").
"""

from __future__ import annotations

import json
import struct
import uuid
from dataclasses import dataclass

TABLE_TRUNCATE_BYTE = 3
# system.local.truncated_at values: the commit log position (segment id, offset in it) the
# truncation's flush ended at, then the truncation time in ms (SystemKeyspace's
# truncationAsMapEntry, Cassandra 4.0 to 5.0)
_TRUNCATION_RECORD = struct.Struct(">qiq")
REMOVES_ALL_US = (1 << 63) - 1  # above every write time a cell can carry


@dataclass(frozen=True)
class TableTruncate:
    """One node's truncation of a captured table."""

    table_id: uuid.UUID
    keyspace: str
    table: str
    host: str  # the publisher whose node truncated
    truncated_at_ms: int  # that node's clock when it truncated
    datacenter: str = ""
    segment_id: int = 0  # the commit log position the node's truncation flush ended at
    position: int = 0
    reset: bool = False  # an operator's reset (`snapshot --reset`), not a TRUNCATE
    # a reset's: the table's version its snapshot publishes, so its truncate event can be
    # rendered even where the job holds no key of the table (a new checkpoint)
    schema_hash: str = ""

    @property
    def name(self) -> str:
        """keyspace.table"""
        return f"{self.keyspace}.{self.table}"

    @property
    def floor_us(self) -> int:
        """The write time (µs) at and below which the truncation removed a cell."""
        return self.truncated_at_ms * 1000

    @property
    def removes_up_to_us(self) -> int:
        """The write time (µs) at and below which the state's cells are removed: the floor,
        or every cell for a reset."""
        return REMOVES_ALL_US if self.reset else self.floor_us


def parse_truncation_record(blob: bytes) -> tuple[int, int, int]:
    """(segment id, position, truncation time ms) of one `system.local.truncated_at` value
    (ValueError if it is not one)."""
    if len(blob) != _TRUNCATION_RECORD.size:
        raise ValueError(f"a truncation record is {_TRUNCATION_RECORD.size} bytes, "
                         f"not {len(blob)}")
    segment_id, position, at_ms = _TRUNCATION_RECORD.unpack(blob)
    return segment_id, position, at_ms


def is_table_truncate(value: bytes | None) -> bool:
    """Whether a raw-topic value is a table-truncated record."""
    return bool(value) and value[0] == TABLE_TRUNCATE_BYTE  # type: ignore[index]


def encode_table_truncate(truncate: TableTruncate) -> bytes:
    """The raw-topic value of a table-truncated record (its key: `truncate.table_id.bytes`)."""
    body = {"table_id": str(truncate.table_id), "keyspace": truncate.keyspace,
            "table": truncate.table, "host": truncate.host, "datacenter": truncate.datacenter,
            "truncated_at_ms": truncate.truncated_at_ms, "segment_id": truncate.segment_id,
            "position": truncate.position}
    if truncate.reset:  # (left out otherwise: a TRUNCATE's record is what it always was)
        body |= {"reset": True, "schema_hash": truncate.schema_hash}
    return bytes([TABLE_TRUNCATE_BYTE]) + json.dumps(body, sort_keys=True).encode()


def decode_table_truncate(value: bytes) -> TableTruncate:
    """A table-truncated record from its raw-topic value (ValueError, KeyError or TypeError
    if it is not one, or is damaged)."""
    if not is_table_truncate(value):
        raise ValueError("not a table-truncated record")
    body = json.loads(value[1:])
    return TableTruncate(uuid.UUID(body["table_id"]), str(body["keyspace"]),
                         str(body["table"]), str(body["host"]), int(body["truncated_at_ms"]),
                         str(body["datacenter"]), int(body["segment_id"]),
                         int(body["position"]), bool(body.get("reset", False)),
                         str(body.get("schema_hash", "")))
