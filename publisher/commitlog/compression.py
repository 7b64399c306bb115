"""Decompressors for compressed commit log sections, as Cassandra's compressors write them."""

from __future__ import annotations

import zlib
from collections.abc import Callable

import cramjam


def _lz4(block: bytes, size: int) -> bytes:
    # LZ4Compressor: 4-byte little-endian uncompressed length, then one raw LZ4 block.
    return bytes(cramjam.lz4.decompress_block(block))


def _snappy(block: bytes, size: int) -> bytes:
    return bytes(cramjam.snappy.decompress_raw(block))


def _deflate(block: bytes, size: int) -> bytes:
    return zlib.decompress(block)


def _zstd(block: bytes, size: int) -> bytes:
    return bytes(cramjam.zstd.decompress(block, output_len=size))


DECOMPRESSORS: dict[str, Callable[[bytes, int], bytes]] = {
    "LZ4Compressor": _lz4,
    "SnappyCompressor": _snappy,
    "DeflateCompressor": _deflate,
    "ZstdCompressor": _zstd,
}
