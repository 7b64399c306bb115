"""The heartbeat record: what a publisher writes to every partition of every raw topic at a
set interval, beside its RowUpdates, so a quiet node can be told from a dead one and a Kafka
partition without writes still moves the materializer (TTL expiry in its partition stores).

Layout: a leading byte 0 (a RowUpdate's is its format version, 1 and up), then JSON with the
publisher's host, its read position and its clock. The key is the host. The materializer
drops heartbeats before any merge; consumers of the event topics never see them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

HEARTBEAT_BYTE = 0


@dataclass(frozen=True)
class Heartbeat:
    """One publisher's sign of life."""

    host: str
    at_ms: int  # the publisher's clock when it sent this
    position: dict[str, Any]  # where it was reading (its /status "current")


def is_heartbeat(value: bytes | None) -> bool:
    """Whether a raw-topic value is a heartbeat (not a RowUpdate)."""
    return bool(value) and value[0] == HEARTBEAT_BYTE  # type: ignore[index]


def encode_heartbeat(beat: Heartbeat) -> bytes:
    """The raw-topic value of a heartbeat."""
    body = {"host": beat.host, "at_ms": beat.at_ms, "position": beat.position}
    return bytes([HEARTBEAT_BYTE]) + json.dumps(body, sort_keys=True, default=str).encode()


def decode_heartbeat(value: bytes) -> Heartbeat:
    """A heartbeat from its raw-topic value (ValueError if it is not one)."""
    if not is_heartbeat(value):
        raise ValueError("not a heartbeat record")
    body = json.loads(value[1:])
    return Heartbeat(str(body["host"]), int(body["at_ms"]), dict(body.get("position") or {}))
