"""Decompressors for compressed commit log sections, as Cassandra's compressors write them."""

from __future__ import annotations

import zlib
from collections.abc import Callable

import cramjam


class DecompressionError(ValueError):
    """A block that does not decompress to the size its section header promises."""


def _lz4(block: bytes, size: int) -> bytes:
    # LZ4Compressor: 4-byte little-endian uncompressed length, then one raw LZ4 block. Check
    # the length first: a damaged one must not make the library allocate gigabytes.
    if len(block) < 4 or int.from_bytes(block[:4], "little") != size:
        raise DecompressionError("LZ4 block length differs from the section's")
    return bytes(cramjam.lz4.decompress_block(block))


def _snappy(block: bytes, size: int) -> bytes:
    # A raw Snappy block starts with its uncompressed length as a little-endian varint.
    length = shift = 0
    for i, byte in enumerate(block[:5]):
        length |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            break
        if i == 4:
            raise DecompressionError("bad Snappy length")
    if length != size:
        raise DecompressionError("Snappy block length differs from the section's")
    return bytes(cramjam.snappy.decompress_raw(block))


def _deflate(block: bytes, size: int) -> bytes:
    inflater = zlib.decompressobj()
    data = inflater.decompress(block, size + 1)  # never more than one byte past the promise
    if len(data) > size or not inflater.eof:
        raise DecompressionError("Deflate stream longer than the section or unterminated")
    return data


def _zstd(block: bytes, size: int) -> bytes:
    # Check the frame's own content size against the section's first: given an output length,
    # the library pads a short result with zeros instead of failing.
    declared = zstd_content_size(block)
    if declared is not None and declared != size:
        raise DecompressionError("Zstd frame size differs from the section's")
    data = bytes(cramjam.zstd.decompress(block))
    if len(data) != size:
        raise DecompressionError("Zstd frame decompressed to another size than the section's")
    return data


def zstd_content_size(frame: bytes) -> int | None:
    """Frame_Content_Size from a Zstandard frame header, or None when the frame omits it."""
    if len(frame) < 6 or frame[:4] != b"\x28\xb5\x2f\xfd":
        raise DecompressionError("not a Zstd frame")
    descriptor = frame[4]
    fcs_flag, single_segment, dict_flag = descriptor >> 6, (descriptor >> 5) & 1, descriptor & 3
    p = 5 + (0 if single_segment else 1) + (0, 1, 2, 4)[dict_flag]
    width = (1 if single_segment else 0, 2, 4, 8)[fcs_flag]
    if width == 0:
        return None
    if len(frame) < p + width:
        raise DecompressionError("truncated Zstd frame header")
    value = int.from_bytes(frame[p:p + width], "little")
    return value + 256 if width == 2 else value


DECOMPRESSORS: dict[str, Callable[[bytes, int], bytes]] = {
    "LZ4Compressor": _lz4,
    "SnappyCompressor": _snappy,
    "DeflateCompressor": _deflate,
    "ZstdCompressor": _zstd,
}
