"""The small encodings a mutation is built of: unsigned vints, encoding stats, deletion
times, cells, clustering prefixes, column subsets (Cassandra's VIntCoding,
EncodingStats.Serializer, DeletionTime.Serializer, Cell.Serializer,
ClusteringPrefix.Serializer, Columns.Serializer).

Module functions, not methods: cheaper to call on the decoder's hot path. Pure, no I/O.
"""

from __future__ import annotations

from typing import Any

from publisher.commitlog.errors import DecodeError
from publisher.commitlog.model import Cell, DeletionTime

LIVE_MARKED_FOR_DELETE_AT = -(1 << 63)
U64 = (1 << 64) - 1
S64 = 1 << 63
# EncodingStats are written as deltas from these (Cassandra's EncodingStats epochs)
TIMESTAMP_EPOCH = 1442880000000000
DELETION_TIME_EPOCH = 1442880000
# cell flags
CELL_DELETED, CELL_EXPIRING, CELL_EMPTY, CELL_ROW_TS, CELL_ROW_TTL = 1, 2, 4, 8, 16
# Number of leading one bits of a uvint's first byte = number of extra bytes.
EXTRA = bytes(8 - (b ^ 0xFF).bit_length() for b in range(256))


def uvint(buf: bytes, p: int) -> tuple[int, int]:
    first = buf[p]
    if first < 0x80:
        return first, p + 1
    extra = EXTRA[first]
    end = p + 1 + extra
    if end > len(buf):
        raise DecodeError("variable-length integer runs past the end of the mutation")
    value = first & (0xFF >> extra) if extra < 8 else 0
    return (value << (8 * extra)) | int.from_bytes(buf[p + 1:end], "big"), end


def s32(u: int) -> int:
    # A uvint written by writeUnsignedVInt32: a sign-extended int.
    if u >= S64:
        u -= 1 << 64
    if not -(1 << 31) <= u < (1 << 31):
        raise DecodeError(f"32-bit field out of range: {u}")
    return u


def local_time(raw: int, unsigned: bool) -> int | None:
    """A local deletion/expiration time: signed 32-bit (messaging 12) or unsigned (13)."""
    value = raw & 0xFFFFFFFF
    if unsigned:
        return None if value == 0xFFFFFFFF else value
    if value >= 1 << 31:
        value -= 1 << 32
    return None if value == 0x7FFFFFFF else value


def encoding_stats(buf: bytes, p: int, unsigned_ldt: bool
                   ) -> tuple[tuple[int, int, int, bool], int]:
    """A partition update's EncodingStats at `p`, the bases of every delta in it: (minimum
    timestamp, local deletion time, TTL, whether deletion times are unsigned), and where it
    ends."""
    u, p = uvint(buf, p)
    min_ts = ((u + TIMESTAMP_EPOCH) & U64)
    if min_ts >= S64:
        min_ts -= 1 << 64
    u = buf[p]
    if u < 0x80:  # the usual case: no deletions or TTLs, one-byte deltas
        min_ldt = u + DELETION_TIME_EPOCH
        p += 1
    else:
        u, p = uvint(buf, p)
        min_ldt = s32(u) + DELETION_TIME_EPOCH
    u = buf[p]
    if u < 0x80:
        min_ttl = u
        p += 1
    else:
        u, p = uvint(buf, p)
        min_ttl = s32(u)
    return (min_ts, min_ldt, min_ttl, unsigned_ldt), p


def deletion(buf: bytes, p: int, ctx: tuple[int, int, int, bool]) -> tuple[DeletionTime, int]:
    u, p = uvint(buf, p)
    ts = (u + ctx[0]) & U64
    if ts >= S64:
        ts -= 1 << 64
    u, p = uvint(buf, p)
    if ts == LIVE_MARKED_FOR_DELETE_AT:
        return DeletionTime(ts, None), p
    return DeletionTime(ts, local_time(s32(u) + ctx[1], ctx[3])), p


def cell(buf: bytes, p: int, n: int, col: Any, has_path: bool, min_ts: int, min_ldt: int,
          min_ttl: int, unsigned_ldt: bool, row_ts: int, row_ttl: int,
          row_exp: int | None) -> tuple[Cell, int]:
    flags = buf[p]
    p += 1
    if flags & CELL_ROW_TS:
        ts = row_ts
    else:
        first = buf[p]
        if first < 0x80:
            u = first
            p += 1
        else:
            u, p = uvint(buf, p)
        ts = (u + min_ts) & U64
        if ts >= S64:
            ts -= 1 << 64
    ttl = 0
    ldt = None
    deleted = flags & CELL_DELETED
    if flags & CELL_ROW_TTL:
        ttl, ldt = row_ttl, row_exp
    elif deleted or flags & CELL_EXPIRING:
        u, p = uvint(buf, p)
        ldt = local_time(s32(u) + min_ldt, unsigned_ldt)
        if flags & CELL_EXPIRING:
            u, p = uvint(buf, p)
            ttl = s32(u) + min_ttl
            if ttl < 0:
                raise DecodeError(f"negative TTL {ttl} in column {col.schema.name}")
    path = None
    if has_path:  # elements of non-frozen collections and UDT fields
        plen, p = uvint(buf, p)
        path = buf[p:p + plen]
        p += plen
    if flags & CELL_EMPTY:
        value = b""
    else:
        fixed = col.fixed
        if fixed < 0:
            first = buf[p]
            if first < 0x80:
                fixed = first
                p += 1
            else:
                fixed, p = uvint(buf, p)
        end = p + fixed
        if end > n:
            raise DecodeError(f"value of column {col.schema.name} runs past the end")
        value = buf[p:end]
        p = end
    return Cell(col.schema, path, value, ts, ttl, ldt, bool(deleted)), p


def clustering(buf: bytes, p: int, n: int,
                fixed_lengths: list[int]) -> tuple[tuple[bytes | None, ...], int]:
    values: list[bytes | None] = []
    size = len(fixed_lengths)
    header = 0
    for i in range(size):
        j = i & 31
        if j == 0:
            header, p = uvint(buf, p)
        if header & (1 << (2 * j + 1)):
            values.append(None)
        elif header & (1 << (2 * j)):
            values.append(b"")
        else:
            length = fixed_lengths[i]
            if length < 0:
                length, p = uvint(buf, p)
            end = p + length
            if end > n:
                raise DecodeError("clustering value runs past the end of the mutation")
            values.append(buf[p:end])
            p = end
    return tuple(values), p


def subset(buf: bytes, p: int, header: list[Any]) -> tuple[list[Any], int]:
    """The columns a row carries, from Columns.Serializer's subset encoding."""
    v, p = uvint(buf, p)
    m = len(header)
    if v == 0:
        return header, p
    if m < 64:
        if v >> m:
            raise DecodeError(f"column subset bitmap {v:#x} names columns beyond {m}")
        return [c for i, c in enumerate(header) if not (v >> i) & 1], p
    missing = v
    present = m - missing
    if not 0 <= present <= m:
        raise DecodeError(f"column subset says {missing} of {m} columns are missing")
    indexes = []
    for _ in range(present if present < m // 2 else missing):
        i, p = uvint(buf, p)
        if i >= m:
            raise DecodeError(f"column subset index {i} beyond {m}")
        indexes.append(i)
    if present < m // 2:
        return [header[i] for i in indexes], p
    gone = set(indexes)
    return [c for i, c in enumerate(header) if i not in gone], p
