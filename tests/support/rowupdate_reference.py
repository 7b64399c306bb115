"""The reference RowUpdate codec: raw-topic values written and read by fastavro (test code
only).

The runtime writes RowUpdates by hand (`shared.rowupdate.encode`, the publisher's
`RecordWriter`) and reads them by hand (`shared.rowupdate_reader`), for speed; this codec
goes through fastavro over the same schema and framing, and the unit tests hold the runtime's
writers and readers to it byte for byte (tests/unit/publisher/agent/test_records.py,
tests/unit/shared/test_rowupdate_reader.py).
"""

from __future__ import annotations

import io
from hashlib import blake2b
from typing import Any

import fastavro

from shared.rowupdate import (
    COPY_KEY_SIZE,
    DIGEST_SIZE,
    SCHEMA,
    RecordFormatError,
    avro_start,
    encode_source,
    frame,
    mutation_id,
    record_timestamp,
)


def _avro(record: dict[str, Any]) -> tuple[bytes, bytes]:
    """fastavro's Avro bytes of a RowUpdate dict: before its `source` block, and the block."""
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, SCHEMA, record)
    avro = buf.getvalue()
    size = len(avro) - len(encode_source(record["source"]))
    return avro[:size], avro[size:]


def encode_with_fastavro(record: dict[str, Any], mutation: bytes | None = None) -> bytes:
    """The raw-topic value of one RowUpdate dict, the Avro by fastavro; `mutation`: its
    mutation id (default: a mutation of this one record)."""
    content, source = _avro(record)
    return frame(content, source, record, mutation)


def encode_update(records: list[dict[str, Any]]) -> list[bytes]:
    """The raw-topic values of the records split from one partition update (one mutation
    id for all of them), the Avro by fastavro."""
    parts = [_avro(r) for r in records]
    digests = [blake2b(content, digest_size=DIGEST_SIZE).digest() for content, _ in parts]
    mutation = mutation_id(digests, max(record_timestamp(r) for r in records))
    return [frame(content, source, r, mutation, d)
            for (content, source), d, r in zip(parts, digests, records, strict=True)]


def decode(value: bytes) -> dict[str, Any]:
    """The RowUpdate dict of one raw-topic value, read by fastavro."""
    start = avro_start(value)
    try:
        return fastavro.schemaless_reader(io.BytesIO(value[start:]), SCHEMA, None)
    except (EOFError, ValueError, IndexError) as exc:
        raise RecordFormatError(f"undecodable RowUpdate: {exc}") from exc


def digest_of(value: bytes) -> bytes:
    """The copy digest of a raw-topic value."""
    return value[1:1 + DIGEST_SIZE]


def copy_key_of(value: bytes) -> bytes:
    """What a raw-topic value's copies share (COPY_KEY_SIZE bytes after the version byte)."""
    return value[1:1 + COPY_KEY_SIZE]
