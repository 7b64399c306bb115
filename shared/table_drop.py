"""The table-dropped record: what a publisher writes to every partition of the raw topic
when a captured table is gone from Cassandra's schema, so the materializer frees the state
of that table's keys (their entries in every partition store and its changelog).

Layout: a leading byte 2 (a heartbeat's is 0, a RowUpdate's its format version, 4), then
JSON with the table id, its name, the publisher's host and its clock. The key is the table
id's 16 bytes. Every replica's publisher sends one; the materializer drops the table's state
once and takes the others as done. Consumers of the event topics never see these records.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass

TABLE_DROP_BYTE = 2


@dataclass(frozen=True)
class TableDrop:
    """A captured table that is gone from the schema (DROP TABLE, or its keyspace dropped)."""

    table_id: uuid.UUID
    keyspace: str
    table: str
    host: str  # the publisher that saw it gone
    at_ms: int  # that publisher's clock when it saw it

    @property
    def name(self) -> str:
        """keyspace.table"""
        return f"{self.keyspace}.{self.table}"


def is_table_drop(value: bytes | None) -> bool:
    """Whether a raw-topic value is a table-dropped record."""
    return bool(value) and value[0] == TABLE_DROP_BYTE  # type: ignore[index]


def encode_table_drop(drop: TableDrop) -> bytes:
    """The raw-topic value of a table-dropped record (its key: `drop.table_id.bytes`)."""
    body = {"table_id": str(drop.table_id), "keyspace": drop.keyspace, "table": drop.table,
            "host": drop.host, "at_ms": drop.at_ms}
    return bytes([TABLE_DROP_BYTE]) + json.dumps(body, sort_keys=True).encode()


def decode_table_drop(value: bytes) -> TableDrop:
    """A table-dropped record from its raw-topic value (ValueError or KeyError if it is not
    one, or is damaged)."""
    if not is_table_drop(value):
        raise ValueError("not a table-dropped record")
    body = json.loads(value[1:])
    return TableDrop(uuid.UUID(body["table_id"]), str(body["keyspace"]), str(body["table"]),
                     str(body["host"]), int(body["at_ms"]))
