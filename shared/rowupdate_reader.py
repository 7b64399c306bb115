"""A hand-specialised reader of RowUpdate values: the same dicts as fastavro, faster.

fastavro's schemaless_reader costs ~25-30 µs per RowUpdate, most of the materializer's
per-record budget; this reader walks the one schema directly (a unit test holds it equal to
fastavro on every fixture record and on random ones, and to the same errors on damage).
Where the install built it (setup.py), its compiled twin `shared.rowupdate_creader` does the
reading, some 4x faster; this module's `_read` is the reference it is tested against.
"""

from __future__ import annotations

from typing import Any

from shared.rowupdate import KINDS, RecordFormatError, avro_start


def read_row_update(value: bytes) -> dict[str, Any]:
    """The RowUpdate dict of one raw-topic value."""
    start = avro_start(value)
    try:
        rec, end = _reader(value, start)
    except (IndexError, ValueError, UnicodeDecodeError) as exc:
        raise RecordFormatError(f"undecodable RowUpdate: {exc}") from exc
    if end != len(value):
        raise RecordFormatError(f"undecodable RowUpdate: {len(value) - end} bytes left over")
    return rec


_STRINGS: dict[bytes, str] = {}  # names repeat in every record: decode each once


def _read(b: bytes, start: int) -> tuple[dict[str, Any], int]:
    p = start

    def long() -> int:
        nonlocal p
        byte = b[p]
        p += 1
        if byte < 0x80:  # one-byte varints are the common case
            return (byte >> 1) ^ -(byte & 1)
        n = byte & 0x7F
        shift = 7
        while byte & 0x80:
            byte = b[p]
            p += 1
            n |= (byte & 0x7F) << shift
            shift += 7
        return (n >> 1) ^ -(n & 1)

    def raw() -> bytes:
        nonlocal p
        n = long()
        if n < 0 or p + n > len(b):
            raise ValueError(f"bytes length {n} at {p} beyond the value")
        out = b[p:p + n]
        p += n
        return out

    def string() -> str:
        key = raw()
        s = _STRINGS.get(key)
        if s is None:
            s = key.decode()
            if len(_STRINGS) < 100_000:
                _STRINGS[key] = s
        return s

    def union() -> bool:  # [null, T]: branch 0 is one byte 0x00, branch 1 is 0x02
        nonlocal p
        v = b[p]
        p += 1
        if v == 2:
            return True
        if v:
            raise ValueError(f"union branch byte {v} at {p - 1}")
        return False

    def boolean() -> bool:
        nonlocal p
        v = b[p]
        p += 1
        if v > 1:
            raise ValueError(f"boolean byte {v} at {p - 1}")
        return v == 1

    def count() -> int:
        n = long()
        if n < 0:  # a block with its byte size: the size is only a skip hint
            long()
            n = -n
        return n

    def values() -> list[bytes | None]:
        out: list[bytes | None] = []
        while n := count():
            for _ in range(n):
                out.append(raw() if union() else None)
        return out

    def opt_long() -> int | None:
        return long() if union() else None

    if len(b) < start + 16:
        raise ValueError("shorter than a table id")
    table_id = b[start:start + 16]
    p = start + 16
    rec: dict[str, Any] = {"table_id": table_id, "keyspace": string(), "table": string(),
                           "schema_hash": string(), "partition_key": raw(),
                           "clustering": values()}
    kind = long()
    if not 0 <= kind < len(KINDS):
        raise ValueError(f"kind {kind}")
    rec["kind"] = KINDS[kind]
    rec["deletion"] = ({"marked_for_delete_at": long(), "local_deletion_time": opt_long()}
                       if union() else None)
    rec["shadowable"] = boolean()
    rec["range"] = ({"start": values(), "start_inclusive": boolean(), "end": values(),
                     "end_inclusive": boolean()} if union() else None)
    rec["liveness"] = ({"timestamp": long(), "ttl": long(), "local_expiration_time": opt_long()}
                       if union() else None)
    cells = []
    while n := count():
        for _ in range(n):
            cells.append({"column": string(), "path": raw() if union() else None,
                          "value": raw() if union() else None, "timestamp": long(),
                          "ttl": long(), "local_deletion_time": opt_long(),
                          "tombstone": boolean()})
    rec["cells"] = cells
    deletions = []
    while n := count():
        for _ in range(n):
            deletions.append({"column": string(), "marked_for_delete_at": long(),
                              "local_deletion_time": opt_long()})
    rec["complex_deletions"] = deletions
    rec["source"] = {"host": string(), "datacenter": string(), "file": string(),
                     "segment_id": long(), "position": long(), "index": long(),
                     "commitlog_version": long(), "messaging_version": long()}
    return rec, p


try:
    from shared.rowupdate_creader import read as _compiled
except ImportError:  # no compiler at install: the pure reader, same results
    _compiled = None

_reader = _compiled or _read
COMPILED = _compiled is not None  # the compiled reader is in use
