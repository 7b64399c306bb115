"""Byte-level rules of the commit log format: vints, descriptor header, a worked mutation."""

from __future__ import annotations

import json
import struct
import zlib
from pathlib import Path

import pytest

from publisher.commitlog.decoder import MutationDecoder
from publisher.commitlog.descriptor import parse_descriptor
from publisher.commitlog.errors import (
    CorruptSegmentError,
    DecodeError,
    UnsupportedSegmentError,
)
from publisher.commitlog.primitives import s32 as _s32
from publisher.commitlog.primitives import uvint as _uvint
from publisher.commitlog.segment import SegmentReader
from shared.schema import catalog_from_json

# (value, encoding) pairs from Cassandra's VIntCoding, incl. 9-byte negatives.
UVINTS = [
    (0, "00"), (1, "01"), (127, "7f"), (128, "8080"), (300, "812c"), (16383, "bfff"),
    (16384, "c04000"), (2097151, "dfffff"), (2097152, "e0200000"),
    (256405479123000, "fce9330d806838"), (2**56 - 1, "feffffffffffffff"),
    (2**56, "ff0100000000000000"), (2**64 - 1, "ffffffffffffffffff"),
]


@pytest.mark.parametrize(("value", "hexed"), UVINTS)
def test_uvint(value: int, hexed: str) -> None:
    raw = bytes.fromhex(hexed) + b"\x99"  # a following byte must not be consumed
    assert _uvint(raw, 0) == (value, len(raw) - 1)


def test_uvint_truncated_is_a_decode_error() -> None:
    with pytest.raises(DecodeError):
        _uvint(bytes.fromhex("e020"), 0)


def test_s32_sign_extended_and_range() -> None:
    assert _s32(int.from_bytes(bytes.fromhex("fffffffffffffffffb"), "big") & (2**64 - 1)) == -5
    assert _s32(2**31 - 1) == 2**31 - 1
    with pytest.raises(DecodeError):
        _s32(2**31)


HEADER = bytes.fromhex("00000007 0000018bcfe56800 0002 7b7d 52ecfd5a".replace(" ", ""))


def test_descriptor_worked_example() -> None:
    d = parse_descriptor(HEADER)
    assert (d.version, d.segment_id, d.header_length, d.parameters) == (7, 1700000000000, 20, {})
    assert d.messaging_version == 12 and d.compressor is None and not d.encrypted


def test_descriptor_errors() -> None:
    with pytest.raises(CorruptSegmentError, match="header CRC mismatch"):
        parse_descriptor(HEADER[:-1] + b"\x00")
    v9 = struct.pack(">iqH", 9, 1, 2) + b"{}"
    with pytest.raises(UnsupportedSegmentError, match="version 9 is not supported"):
        parse_descriptor(v9 + b"\0\0\0\0")
    with pytest.raises(CorruptSegmentError, match="truncated"):
        parse_descriptor(HEADER[:10])


def _segment(path: Path, version: int, seg_id: int, params: dict) -> Path:
    raw = json.dumps(params).encode()
    crc = zlib.crc32(struct.pack(">iIIi", version, seg_id & 0xFFFFFFFF, seg_id >> 32, len(raw))
                     + raw)
    path.write_bytes(struct.pack(">iqH", version, seg_id, len(raw)) + raw
                     + struct.pack(">I", crc))
    return path


def test_encrypted_segment_is_refused_clearly(tmp_path: Path) -> None:
    seg = _segment(tmp_path / "CommitLog-7-5.log", 7, 5,
                   {"encCipher": "AES/CBC/PKCS5Padding", "encKeyAlias": "k", "encIV": "00"})
    with pytest.raises(UnsupportedSegmentError, match="encrypted") as err:
        SegmentReader(seg)
    assert err.value.path == str(seg) and err.value.offset == 0


def test_file_name_and_header_ids_must_agree(tmp_path: Path) -> None:
    seg = _segment(tmp_path / "CommitLog-7-6.log", 7, 5, {})
    with pytest.raises(CorruptSegmentError, match="differs from the file name"):
        SegmentReader(seg)


def test_empty_plain_segment_has_no_entries(tmp_path: Path) -> None:
    seg = _segment(tmp_path / "CommitLog-8-5.log", 8, 5, {})
    reader = SegmentReader(seg)
    assert list(reader.entries()) == []
    assert reader.descriptor.messaging_version == 13


SCHEMA = {"format": 1, "tables": [{
    "keyspace": "ks", "table": "t", "id": "5a1c395e-b7ab-11ee-a507-0242ac120002", "cdc": True,
    "columns": [
        {"name": "pk", "kind": "partition_key", "position": 0, "type": "int"},
        {"name": "ck", "kind": "clustering", "position": 0, "type": "text"},
        {"name": "v", "kind": "regular", "position": -1, "type": "int"},
        {"name": "s", "kind": "static", "position": -1, "type": "text"},
        {"name": "tags", "kind": "regular", "position": -1, "type": "set<text>"}]}]}
# INSERT INTO ks.t (pk, ck, v) VALUES (42, 'a', 7) USING TIMESTAMP 1700000000000000
MUTATION_A = bytes.fromhex(
    "01 5a1c395eb7ab11eea5070242ac120002 040000002a 10 fce9d96a43c000 00 00 0101 76 01"
    " 24 000161 00 08 00000007 01".replace(" ", ""))


def test_worked_example_insert() -> None:
    tables = catalog_from_json(SCHEMA)
    m = MutationDecoder(tables.get).decode(MUTATION_A, 12)
    (u,) = m.updates
    assert (m.keyspace, u.table.table, u.partition_key) == ("ks", "t", b"\x00\x00\x00\x2a")
    (row,) = u.rows
    assert row.clustering == (b"a",)
    assert row.liveness.timestamp == 1700000000000000 and row.liveness.ttl == 0
    (cell,) = row.cells
    assert (cell.column.name, cell.value, cell.timestamp, cell.tombstone) == (
        "v", b"\x00\x00\x00\x07", 1700000000000000, False)


def test_worked_example_truncated_or_extended_fails() -> None:
    decoder = MutationDecoder(catalog_from_json(SCHEMA).get)
    for bad in (MUTATION_A[:-1], MUTATION_A + b"\x00", MUTATION_A[:30]):
        with pytest.raises(DecodeError):
            decoder.decode(bad, 12)


def test_unknown_table_and_column_are_typed() -> None:
    from publisher.commitlog.errors import UnknownColumnError, UnknownTableError

    with pytest.raises(DecodeError) as err:
        MutationDecoder(lambda _id: None).decode(MUTATION_A, 12)
    assert err.value.error_class is UnknownTableError
    assert err.value.table_id == "5a1c395e-b7ab-11ee-a507-0242ac120002"
    renamed = MUTATION_A.replace(b"\x01\x01\x76", b"\x01\x01\x77")  # column "w"
    with pytest.raises(DecodeError) as err:
        MutationDecoder(catalog_from_json(SCHEMA).get).decode(renamed, 12)
    assert err.value.error_class is UnknownColumnError


def test_sync_marker_crc_with_a_high_bit_segment_id(tmp_path: Path) -> None:
    # 1700000000000 = 0x18B_CFE56800: the low word has its top bit set.
    seg = _segment(tmp_path / "CommitLog-7-1700000000000.log", 7, 1700000000000, {})
    header_len = seg.stat().st_size
    crc = zlib.crc32(struct.pack(">IIi", 0xCFE56800, 0x18B, header_len))
    with open(seg, "ab") as fh:
        fh.write(struct.pack(">iI", header_len + 8, crc) + b"\0" * 8)
    reader = SegmentReader(seg)
    assert list(reader.entries()) == []
    assert reader.last_position == header_len + 8
    with open(seg, "r+b") as fh:  # damage the marker CRC
        fh.seek(header_len + 4)
        fh.write(b"\xff")
    with pytest.raises(CorruptSegmentError, match="sync marker CRC mismatch") as err:
        list(SegmentReader(seg).entries())
    assert err.value.offset == header_len
