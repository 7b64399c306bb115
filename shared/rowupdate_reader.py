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


class _Cursor:
    """Avro's primitive encodings read from `b` at `p`, which each read moves on."""

    __slots__ = ("b", "p")

    def __init__(self, b: bytes, p: int) -> None:
        self.b, self.p = b, p

    def long(self) -> int:
        """A zig-zag varint."""
        b = self.b
        byte = b[self.p]
        self.p += 1
        if byte < 0x80:  # one-byte varints are the common case
            return (byte >> 1) ^ -(byte & 1)
        n = byte & 0x7F
        shift = 7
        while byte & 0x80:
            byte = b[self.p]
            self.p += 1
            n |= (byte & 0x7F) << shift
            shift += 7
        return (n >> 1) ^ -(n & 1)

    def raw(self) -> bytes:
        """Bytes with their length first."""
        n = self.long()
        p = self.p
        if n < 0 or p + n > len(self.b):
            raise ValueError(f"bytes length {n} at {p} beyond the value")
        self.p = p + n
        return self.b[p:p + n]

    def string(self) -> str:
        """A UTF-8 string (names repeat: each decoded once)."""
        key = self.raw()
        s = _STRINGS.get(key)
        if s is None:
            s = key.decode()
            if len(_STRINGS) < 100_000:
                _STRINGS[key] = s
        return s

    def union(self) -> bool:
        """Whether a [null, T] union holds its T: branch 0 is one byte 0x00, 1 is 0x02."""
        v = self.b[self.p]
        self.p += 1
        if v == 2:
            return True
        if v:
            raise ValueError(f"union branch byte {v} at {self.p - 1}")
        return False

    def boolean(self) -> bool:
        """A boolean byte."""
        v = self.b[self.p]
        self.p += 1
        if v > 1:
            raise ValueError(f"boolean byte {v} at {self.p - 1}")
        return v == 1

    def count(self) -> int:
        """An array or map block's item count (0: the end)."""
        n = self.long()
        if n < 0:  # a block with its byte size: the size is only a skip hint
            self.long()
            n = -n
        return n

    def values(self) -> list[bytes | None]:
        """An array of [null, bytes]."""
        out: list[bytes | None] = []
        while n := self.count():
            for _ in range(n):
                out.append(self.raw() if self.union() else None)
        return out

    def opt_long(self) -> int | None:
        """A [null, long]."""
        return self.long() if self.union() else None


def _read(b: bytes, start: int) -> tuple[dict[str, Any], int]:
    """The RowUpdate at `start` of `b`, and where it ends."""
    if len(b) < start + 16:
        raise ValueError("shorter than a table id")
    c = _Cursor(b, start + 16)
    long, union, boolean, opt_long, values = c.long, c.union, c.boolean, c.opt_long, c.values
    rec: dict[str, Any] = {"table_id": b[start:start + 16], "keyspace": c.string(),
                           "table": c.string(), "schema_hash": c.string(),
                           "partition_key": c.raw(), "clustering": values()}
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
    rec["cells"] = _cells(c)
    deletions = []
    while n := c.count():
        for _ in range(n):
            deletions.append({"column": c.string(), "marked_for_delete_at": long(),
                              "local_deletion_time": opt_long()})
    rec["complex_deletions"] = deletions
    rec["source"] = {"host": c.string(), "datacenter": c.string(), "file": c.string(),
                     "segment_id": long(), "position": long(), "index": long(),
                     "commitlog_version": long(), "messaging_version": long()}
    return rec, c.p


def _cells(c: _Cursor) -> list[dict[str, Any]]:
    """A RowUpdate's cells."""
    cells = []
    raw, union, long = c.raw, c.union, c.long
    while n := c.count():
        for _ in range(n):
            cells.append({"column": c.string(), "path": raw() if union() else None,
                          "value": raw() if union() else None, "timestamp": long(),
                          "ttl": long(), "local_deletion_time": c.opt_long(),
                          "tombstone": c.boolean()})
    return cells


try:
    from shared.rowupdate_creader import read as _compiled
except ImportError:  # no compiler at install: the pure reader, same results
    _compiled = None

_reader = _compiled or _read
COMPILED = _compiled is not None  # the compiled reader is in use
