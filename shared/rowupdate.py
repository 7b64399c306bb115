"""The raw-topic record: one RowUpdate, Avro-encoded after a version byte
(docs/architecture.md "Raw records")."""

from __future__ import annotations

from collections.abc import Iterable
from hashlib import blake2b
from typing import Any

import fastavro

# The leading byte of every raw-topic value: 4 = the byte, the copy digest, the mutation id
# (DIGEST_SIZE bytes each), the Avro RowUpdate. Formats 1-3 came before casscade's first
# release and are not read.
FORMAT_VERSION = 4
# The copy digest: BLAKE2b-128 of the Avro bytes before the trailing `source` block.
# Replicas' copies of one write are byte-identical there (the coordinator fixes timestamps,
# TTLs and local deletion/expiration times before it sends the mutation; a hint replays
# the same bytes), so equal digests mean equal content and merging a second copy can change
# nothing: a partition store drops such copies before the merge (with the mutation id,
# below; docs/architecture.md "Partition stores"). A read repair is a mutation of its own,
# with its own digest. At a fixed offset, so a task reads it without decoding anything.
# The mutation id: the newest write time of all the records split from one partition update
# (one table's part of one commit log mutation; 8 bytes, big-endian, sign bit flipped so the
# bytes sort as the times do), then BLAKE2b-64 of their copy digests in split order. Every
# replica computes the same id for its copy of the mutation, so the materializer keeps a
# mutation's records together (one mutation, one change) even when the copies that survive
# the dedupe come from different replicas (a source position could not), and orders a
# micro-batch's mutations by their write time even when only some of their records are in
# it (the rest came in an earlier batch, or the dedupe dropped their copies here).
DIGEST_SIZE = 16
TIME_SIZE = 8
_TIME_BIAS = 1 << 63
HEADER_SIZE = 1 + 2 * DIGEST_SIZE  # where the Avro RowUpdate starts
# What makes two raw values copies of one record, at byte 1: the copy digest and the
# mutation id after it. The same record content can belong to two mutations (a statement
# run alone and again inside a batch, one USING TIMESTAMP, one second): those are two
# records, each part of its own change, and neither may stand in for the other.
COPY_KEY_SIZE = 2 * DIGEST_SIZE
VERSION_BYTE = bytes([FORMAT_VERSION])
MIN_TS = -(1 << 63)
KINDS = ["ROW", "STATIC_ROW", "PARTITION_DELETION", "RANGE_TOMBSTONE", "SNAPSHOT_ROW"]

_VALUES = {"type": "array", "items": ["null", "bytes"]}
_DELETION = {
    "type": "record", "name": "Deletion", "fields": [
        {"name": "marked_for_delete_at", "type": "long"},
        {"name": "local_deletion_time", "type": ["null", "long"], "default": None},
    ]}
# The format's definition: the hand-specialised writer below and the readers
# (shared.rowupdate_reader) follow it field by field; the tests' reference codec
# (tests/support/rowupdate_reference.py) writes and reads through it with fastavro.
SCHEMA = fastavro.parse_schema({
    "type": "record", "name": "RowUpdate", "namespace": "io.casscade.raw",
    "doc": "One row-level change from one replica's commit log (or the bootstrap snapshot).",
    "fields": [
        {"name": "table_id", "type": {"type": "fixed", "name": "TableId", "size": 16}},
        {"name": "keyspace", "type": "string"},
        {"name": "table", "type": "string"},
        {"name": "schema_hash", "type": "string"},
        {"name": "partition_key", "type": "bytes"},
        {"name": "clustering", "type": _VALUES, "default": []},
        {"name": "kind", "type": {"type": "enum", "name": "Kind", "symbols": KINDS}},
        {"name": "deletion", "type": ["null", _DELETION], "default": None},
        {"name": "shadowable", "type": "boolean", "default": False},
        {"name": "range", "type": ["null", {
            "type": "record", "name": "Range", "fields": [
                {"name": "start", "type": _VALUES},
                {"name": "start_inclusive", "type": "boolean"},
                {"name": "end", "type": _VALUES},
                {"name": "end_inclusive", "type": "boolean"},
            ]}], "default": None},
        {"name": "liveness", "type": ["null", {
            "type": "record", "name": "Liveness", "fields": [
                {"name": "timestamp", "type": "long"},
                {"name": "ttl", "type": "int"},
                {"name": "local_expiration_time", "type": ["null", "long"], "default": None},
            ]}], "default": None},
        {"name": "cells", "type": {"type": "array", "items": {
            "type": "record", "name": "Cell", "fields": [
                {"name": "column", "type": "string"},
                {"name": "path", "type": ["null", "bytes"], "default": None},
                {"name": "value", "type": ["null", "bytes"], "default": None},
                {"name": "timestamp", "type": "long"},
                {"name": "ttl", "type": "int", "default": 0},
                {"name": "local_deletion_time", "type": ["null", "long"], "default": None},
                {"name": "tombstone", "type": "boolean", "default": False},
            ]}}, "default": []},
        {"name": "complex_deletions", "type": {"type": "array", "items": {
            "type": "record", "name": "ComplexDeletion", "fields": [
                {"name": "column", "type": "string"},
                {"name": "marked_for_delete_at", "type": "long"},
                {"name": "local_deletion_time", "type": ["null", "long"], "default": None},
            ]}}, "default": []},
        {"name": "source", "type": {
            "type": "record", "name": "Source", "fields": [
                {"name": "host", "type": "string"},
                {"name": "datacenter", "type": "string"},
                {"name": "file", "type": "string"},
                {"name": "segment_id", "type": "long"},
                {"name": "position", "type": "long"},
                {"name": "index", "type": "int"},
                {"name": "commitlog_version", "type": "int"},
                {"name": "messaging_version", "type": "int"},
            ]}},
    ],
})


def is_row_update(value: bytes | None) -> bool:
    """Whether a raw-topic value is a RowUpdate of this format (not a heartbeat, a
    table-dropped or table-truncated record, nor a value of another format)."""
    return bool(value) and value[:1] == VERSION_BYTE  # type: ignore[index]


class RecordFormatError(ValueError):
    """A raw-topic value that is not a RowUpdate of a known format version."""


def record_timestamp(rec: dict[str, Any]) -> int:
    """The newest write time a RowUpdate carries (µs): its place in write-time order."""
    ts = MIN_TS
    if rec["deletion"] is not None:
        ts = rec["deletion"]["marked_for_delete_at"]
    if rec["liveness"] is not None:
        ts = max(ts, rec["liveness"]["timestamp"])
    for c in rec["cells"]:
        ts = max(ts, c["timestamp"])
    for d in rec["complex_deletions"]:
        ts = max(ts, d["marked_for_delete_at"])
    return ts


def mutation_id(digests: Iterable[bytes], newest_us: int) -> bytes:
    """The mutation id of the records split from one partition update: their newest write
    time, then a digest of their copy digests in split order."""
    return ((newest_us + _TIME_BIAS).to_bytes(TIME_SIZE, "big")
            + blake2b(b"".join(digests), digest_size=DIGEST_SIZE - TIME_SIZE).digest())


def frame(content: bytes, source: bytes, record: dict[str, Any],
          mutation: bytes | None = None, digest: bytes | None = None) -> bytes:
    """A raw-topic value from a record's Avro bytes before `source` and its `source` block;
    `mutation`: its mutation id (default: a mutation of this one record); `digest`: its
    copy digest if already computed."""
    digest = digest or blake2b(content, digest_size=DIGEST_SIZE).digest()
    mutation = mutation or mutation_id((digest,), record_timestamp(record))
    return b"".join((VERSION_BYTE, digest, mutation, content, source))


def avro_start(value: bytes) -> int:
    """Where the Avro RowUpdate starts in a raw-topic value; a RecordFormatError naming the
    version byte of any other format."""
    if value[:1] != VERSION_BYTE or len(value) <= HEADER_SIZE:
        raise RecordFormatError(f"unknown RowUpdate format version "
                                f"{value[0] if value else None} (reads {FORMAT_VERSION})")
    return HEADER_SIZE


def mutation_of_value(value: bytes) -> bytes:
    """The mutation id a raw-topic value carries."""
    return value[1 + DIGEST_SIZE:HEADER_SIZE]


def mutation_time_of_value(value: bytes) -> int:
    """The newest write time of the mutation a raw-topic value belongs to."""
    start = 1 + DIGEST_SIZE
    return int.from_bytes(value[start:start + TIME_SIZE], "big") - _TIME_BIAS


# ---- a hand-specialised writer for this one schema ------------------------------------------
# fastavro spends ~40 µs on a RowUpdate of four cells, which alone would cap the publisher
# near 20,000 rows/s; this writer produces the same bytes in a fraction of the time (a unit
# test holds it to fastavro's, tests/support/rowupdate_reference.py).
def _varint(z: int) -> bytes:
    """Unsigned LEB128 varint of z >= 0 (the bytes of an already zigzagged long)."""
    out = bytearray()
    while z >= 0x80:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


_SMALL = [bytes([z]) for z in range(128)]
NULL, SOME = b"\x00", b"\x02"  # union branch 0 (null) / 1 (the value)
FALSE, TRUE = b"\x00", b"\x01"
KIND = {k: _SMALL[2 * i] for i, k in enumerate(KINDS)}
_strings: dict[str, bytes] = {}
# Zigzag values below 2**14 (longs -8192..8191: lengths, counts, indexes, TTLs) by table;
# larger ones as their low 14 bits (two continued bytes) + the varint of the rest, which is
# cached: timestamps and positions of one segment share their high bits.
_TABLE = [_varint(z) for z in range(1 << 14)]
_LOW = [bytes(((z & 0x7F) | 0x80, (z >> 7) | 0x80)) for z in range(1 << 14)]
_high: dict[int, bytes] = {}
# For callers that inline the common case: SMALL_LONGS[2 * n] == avro_long(n), 0 <= n < 8192.
SMALL_LONGS = _TABLE
SMALL_LIMIT = 8192


def avro_long(n: int) -> bytes:
    """Avro zigzag varint of an int or long."""
    z = (n << 1) if n >= 0 else ((-n) << 1) - 1
    if z < 0x4000:
        return _TABLE[z]
    hi = z >> 14
    enc = _high.get(hi)
    if enc is None:
        enc = _varint(hi)
        if len(_high) >= 65_536:
            _high.clear()
        _high[hi] = enc
    return _LOW[z & 0x3FFF] + enc


def _bytes(b: bytes) -> bytes:
    return avro_long(len(b)) + b


def avro_string(s: str) -> bytes:
    """Avro string (length + UTF-8), cached: names repeat in every record."""
    enc = _strings.get(s)
    if enc is None:
        raw = s.encode()
        enc = avro_long(len(raw)) + raw
        if len(_strings) < 100_000:
            _strings[s] = enc
    return enc


def avro_opt_long(n: int | None) -> bytes:
    """Avro union [null, long]."""
    return NULL if n is None else SOME + avro_long(n)


def avro_values(values: list[bytes | None] | tuple[bytes | None, ...]) -> bytes:
    """Avro array of [null, bytes] (clustering values, range bounds)."""
    if not values:
        return b"\x00"
    parts = [avro_long(len(values))]
    for v in values:
        parts.append(NULL if v is None else SOME + avro_long(len(v)) + v)
    parts.append(b"\x00")
    return b"".join(parts)


def _deletion(d: dict[str, Any] | None) -> bytes:
    if d is None:
        return NULL
    return SOME + avro_long(d["marked_for_delete_at"]) + avro_opt_long(d["local_deletion_time"])


def encode(record: dict[str, Any], mutation: bytes | None = None) -> bytes:
    """The raw-topic value of one RowUpdate dict (the same bytes as fastavro's Avro);
    `mutation`: its mutation id (default: a mutation of this one record)."""
    return frame(_content(record), encode_source(record["source"]), record, mutation)


def _content(record: dict[str, Any]) -> bytes:
    """A RowUpdate's Avro bytes before its `source` block."""
    parts = [record["table_id"], avro_string(record["keyspace"]),
             avro_string(record["table"]), avro_string(record["schema_hash"]),
             _bytes(record["partition_key"]), avro_values(record["clustering"]),
             KIND[record["kind"]], _deletion(record["deletion"]),
             TRUE if record["shadowable"] else FALSE]
    rng = record["range"]
    if rng is None:
        parts.append(NULL)
    else:
        parts += [SOME, avro_values(rng["start"]), TRUE if rng["start_inclusive"] else FALSE,
                  avro_values(rng["end"]), TRUE if rng["end_inclusive"] else FALSE]
    live = record["liveness"]
    if live is None:
        parts.append(NULL)
    else:
        parts += [SOME, avro_long(live["timestamp"]), avro_long(live["ttl"]),
                  avro_opt_long(live["local_expiration_time"])]
    cells = record["cells"]
    if cells:
        parts.append(avro_long(len(cells)))
        last_ts, last_enc = None, b""
        for c in cells:
            ts = c["timestamp"]
            if ts != last_ts:  # the cells of a row usually share one timestamp
                last_ts, last_enc = ts, avro_long(ts)
            path, value = c["path"], c["value"]
            parts += [avro_string(c["column"]),
                      NULL if path is None else SOME + avro_long(len(path)) + path,
                      NULL if value is None else SOME + avro_long(len(value)) + value,
                      last_enc, avro_long(c["ttl"]), avro_opt_long(c["local_deletion_time"]),
                      TRUE if c["tombstone"] else FALSE]
    parts.append(b"\x00")
    deletions = record["complex_deletions"]
    if deletions:
        parts.append(avro_long(len(deletions)))
        for d in deletions:
            parts += [avro_string(d["column"]), avro_long(d["marked_for_delete_at"]),
                      avro_opt_long(d["local_deletion_time"])]
    parts.append(b"\x00")
    return b"".join(parts)


def encode_source(src: dict[str, Any]) -> bytes:
    """The trailing `source` block of a RowUpdate: the only part that differs between the
    replicas' copies of one write."""
    return b"".join((avro_string(src["host"]), avro_string(src["datacenter"]),
                     avro_string(src["file"]), avro_long(src["segment_id"]),
                     avro_long(src["position"]), avro_long(src["index"]),
                     avro_long(src["commitlog_version"]), avro_long(src["messaging_version"])))
