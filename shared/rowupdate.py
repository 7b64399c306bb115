"""The raw-topic record: one RowUpdate (design §3.1), Avro-encoded after a version byte."""

from __future__ import annotations

import io
from typing import Any

import fastavro

FORMAT_VERSION = 1
KINDS = ["ROW", "STATIC_ROW", "PARTITION_DELETION", "RANGE_TOMBSTONE", "SNAPSHOT_ROW"]

_VALUES = {"type": "array", "items": ["null", "bytes"]}
_DELETION = {
    "type": "record", "name": "Deletion", "fields": [
        {"name": "marked_for_delete_at", "type": "long"},
        {"name": "local_deletion_time", "type": ["null", "long"], "default": None},
    ]}
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


class RecordFormatError(ValueError):
    """A raw-topic value that is not a RowUpdate of a known format version."""


def encode(record: dict[str, Any]) -> bytes:
    """Version byte + schemaless Avro of one RowUpdate dict."""
    buf = io.BytesIO()
    buf.write(bytes([FORMAT_VERSION]))
    fastavro.schemaless_writer(buf, SCHEMA, record)
    return buf.getvalue()


def decode(value: bytes) -> dict[str, Any]:
    """The RowUpdate dict of one raw-topic value."""
    if not value or value[0] != FORMAT_VERSION:
        raise RecordFormatError(f"unknown RowUpdate format version "
                                f"{value[0] if value else None} (expected {FORMAT_VERSION})")
    try:
        return fastavro.schemaless_reader(io.BytesIO(value[1:]), SCHEMA, None)
    except (EOFError, ValueError, IndexError) as exc:
        raise RecordFormatError(f"undecodable RowUpdate: {exc}") from exc
