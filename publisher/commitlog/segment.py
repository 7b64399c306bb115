"""One commit log segment: sync sections and entry framing, plain or compressed.

Positions are logical (Cassandra's CommitLogPosition): the file offset for plain segments,
the offset in the uncompressed view for compressed ones. An entry's position is its *end*,
so "resume from p" means "entries whose end > p", and an `_cdc.idx` offset (a sync marker's
logical position) bounds what may be read of a live segment.

A reader walks a segment's sync markers from its header to the sections it reads. A live
segment gains a section every time Cassandra marks what it wrote (every 100 ms or so under
writes: thousands in a segment), and the agent reads it again every poll; so a read may
start its walk at a `SectionMark` an earlier read of the same file left, instead of the
header. A mark is checked as every marker is (its CRC covers the segment id and the
offset); one that does not check out is ignored and the walk starts at the header.
"""

from __future__ import annotations

import os
import struct
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

from publisher.commitlog.compression import DECOMPRESSORS
from publisher.commitlog.descriptor import Descriptor, parse_descriptor, parse_name
from publisher.commitlog.errors import CorruptSegmentError, UnsupportedSegmentError

_MARKER = struct.Struct(">iI")
_COMPRESSED_MARKER = struct.Struct(">iIi")
_SIZE = struct.Struct(">iI")
_CRC = struct.Struct(">I")
ENTRY_OVERHEAD = 12
_HEADER_READ = 64 * 1024  # the JSON parameters are tiny; this always covers the header
# Upper bound of one section's uncompressed size: Cassandra caps commit log segments at
# 2 GiB, sane ones are 32-128 MiB; a damaged length must not drive a huge allocation.
MAX_SECTION = 512 * 1024 * 1024


# One framed, CRC-checked mutation: (start, position, payload). `position` is the entry's
# logical end, Cassandra's CommitLogPosition. A plain tuple: it is made for every mutation.
Entry = tuple[int, int, bytes]


class SectionMark(NamedTuple):
    """Where a sync section starts: its marker's file offset and its data's logical start
    (the same in a plain segment)."""

    file_offset: int
    logical: int


class SegmentReader:
    """Iterates the entries of one segment file, one sync section in memory at a time."""

    def __init__(self, path: Path | str, until: int | None = None, resume_from: int = 0,
                 start: SectionMark | None = None) -> None:
        """`until`: read no section ending past this logical offset (a live segment's idx
        offset); None reads to the end of valid data. `resume_from`: skip entries whose end
        position is at or before it. `start`: a section of this file at or before
        `resume_from` (an earlier reader's `section`) to begin the walk at."""
        self.path = Path(path)
        self.until = until
        self.resume_from = resume_from
        self.file_size = os.path.getsize(self.path)
        with open(self.path, "rb") as fh:
            head = fh.read(_HEADER_READ)
        self.descriptor: Descriptor = parse_descriptor(head, str(self.path))
        named = parse_name(self.path)
        if named is not None and named[1] != self.descriptor.segment_id:
            raise CorruptSegmentError(
                str(self.path), 4, f"segment id {self.descriptor.segment_id} in the header "
                                   f"differs from the file name's {named[1]}")
        if self.descriptor.encrypted:
            raise UnsupportedSegmentError(
                str(self.path), 0, "encrypted commit log segments (transparent data encryption) "
                                   "are not supported: the key lives in the node's keystore")
        compressor = self.descriptor.compressor
        if compressor is not None and compressor not in DECOMPRESSORS:
            raise UnsupportedSegmentError(str(self.path), 0,
                                          f"unknown commit log compressor {compressor}")
        # Bytes of valid data seen so far (logical); the resume point of the next read.
        self.last_position = max(resume_from, self.descriptor.header_length)
        head = self.descriptor.header_length
        # The first section not read to its end: where the next read may begin its walk.
        self.section = SectionMark(head, head)
        if start is not None and start.file_offset > head:
            self.section = start  # checked where the walk begins (`_start`)

    # ---- iteration ------------------------------------------------------------------------
    def entries(self) -> Iterator[Entry]:
        """Yield each entry after `resume_from`; raise CorruptSegmentError where data breaks.
        (Returns the generator itself: one `yield from` level less per entry.)"""
        return self._plain() if self.descriptor.compressor is None else self._compressed()

    def _marker_crc(self, offset: int) -> int:
        sid = self.descriptor.segment_id
        return zlib.crc32(struct.pack(">IIi", sid & 0xFFFFFFFF, (sid >> 32) & 0xFFFFFFFF, offset))

    def _corrupt(self, offset: int, reason: str) -> CorruptSegmentError:
        return CorruptSegmentError(str(self.path), offset, reason)

    def _start(self, fh, marker: struct.Struct) -> SectionMark:
        """The section to begin the walk at: `section` if its marker checks out (its CRC, or
        the zero marker of a section not yet written), else the header's end."""
        mark = self.section
        head = self.descriptor.header_length
        if mark.file_offset > head:
            if mark.file_offset + marker.size <= self.file_size:
                nxt, crc = marker.unpack(_read(fh, mark.file_offset, marker.size))[:2]
                if crc == self._marker_crc(mark.file_offset) or (nxt == 0 and crc == 0):
                    return mark
            self.section = mark = SectionMark(head, head)
        return mark

    def _plain(self) -> Iterator[Entry]:
        size = self.file_size
        with open(self.path, "rb") as fh:
            offset = self._start(fh, _MARKER).file_offset
            while True:
                if self.until is not None and offset >= self.until:
                    return
                if offset + _MARKER.size > size:
                    if offset < size and any(_read(fh, offset, size - offset)):
                        raise self._corrupt(offset, "truncated sync marker at end of file")
                    return
                nxt, crc = _MARKER.unpack(_read(fh, offset, _MARKER.size))
                if crc != self._marker_crc(offset):
                    if nxt == 0 and crc == 0:
                        return  # the zero marker after the last synced section
                    raise self._corrupt(offset, f"sync marker CRC mismatch (next={nxt})")
                if nxt < offset + _MARKER.size:
                    raise self._corrupt(offset, f"sync marker points backwards (next={nxt})")
                if self.until is not None and nxt > self.until:
                    return  # section not covered by the synced offset yet
                end = min(nxt, size)
                if nxt > self.resume_from:
                    data = _read(fh, offset + _MARKER.size, end - offset - _MARKER.size)
                    yield from self._section(data, offset + _MARKER.size)
                if nxt > size:
                    raise self._corrupt(size, f"file ends at {size} inside the section that "
                                              f"starts at {offset} and should end at {nxt}")
                self.last_position = max(self.last_position, nxt)
                offset = nxt
                self.section = SectionMark(nxt, nxt)

    def _compressed(self) -> Iterator[Entry]:
        size = self.file_size
        decompress = DECOMPRESSORS[self.descriptor.compressor or ""]
        with open(self.path, "rb") as fh:
            offset, logical = self._start(fh, _COMPRESSED_MARKER)
            while True:
                if offset == size:
                    return
                if offset + _COMPRESSED_MARKER.size > size:
                    raise self._corrupt(offset, "truncated section header at end of file")
                nxt, crc, length = _COMPRESSED_MARKER.unpack(
                    _read(fh, offset, _COMPRESSED_MARKER.size))
                if crc != self._marker_crc(offset):
                    if nxt == 0 and crc == 0:
                        return
                    raise self._corrupt(offset, f"sync marker CRC mismatch (next={nxt})")
                if (nxt < offset + _COMPRESSED_MARKER.size or nxt > size or length < 0
                        or length > MAX_SECTION):
                    raise self._corrupt(offset, f"bad compressed section (next={nxt}, "
                                                f"uncompressed length={length}, file={size})")
                data_start = logical + _MARKER.size
                logical_end = data_start + length
                if self.until is not None and logical_end > self.until:
                    return
                if logical_end > self.resume_from:
                    block = _read(fh, offset + _COMPRESSED_MARKER.size,
                                  nxt - offset - _COMPRESSED_MARKER.size)
                    try:
                        data = decompress(block, length)
                    except Exception as exc:  # every codec raises its own error types
                        raise self._corrupt(offset, f"section does not decompress ("
                                                    f"{self.descriptor.compressor}): {exc}") \
                            from exc
                    if len(data) != length:
                        raise self._corrupt(offset, f"section decompressed to {len(data)} "
                                                    f"bytes, header says {length}")
                    yield from self._section(data, data_start, file_offset=offset)
                self.last_position = max(self.last_position, logical_end)
                offset, logical = nxt, logical_end
                self.section = SectionMark(nxt, logical_end)

    def _section(self, data: bytes, base: int, file_offset: int | None = None) -> Iterator[Entry]:
        """Entries of one section's data, which starts at logical position `base`."""
        where = "" if file_offset is None else f" (compressed section at file offset " \
                                               f"{file_offset})"
        p = 0
        n = len(data)
        resume = self.resume_from
        crc32 = zlib.crc32
        while p < n:
            if n - p < _SIZE.size:
                if any(data[p:]):
                    raise self._corrupt(base + p, "stray bytes at the end of a section" + where)
                return
            size, size_crc = _SIZE.unpack_from(data, p)
            if size == 0:
                # Cassandra's end-of-segment marker; only zeros may follow it.
                if any(data[p:]):
                    raise self._corrupt(base + p, "zero entry size followed by data" + where)
                return
            head_crc = crc32(data[p:p + 4])
            if size < 10:
                raise self._corrupt(base + p, f"invalid entry size {size}" + where)
            if head_crc != size_crc:
                raise self._corrupt(base + p, f"entry size CRC mismatch (size {size})" + where)
            end = p + ENTRY_OVERHEAD + size
            if end > n:
                raise self._corrupt(base + p, f"entry of {size} bytes runs past the end of its "
                                              f"section" + where)
            payload = data[p + 8:p + 8 + size]
            (stored,) = _CRC.unpack_from(data, end - 4)
            if crc32(payload, head_crc) != stored:
                raise self._corrupt(base + p, f"entry CRC mismatch (size {size})" + where)
            position = base + end
            if position > resume:
                yield (base + p, position, payload)
                self.last_position = position
            p = end


def _read(fh, offset: int, length: int) -> bytes:
    fh.seek(offset)
    return fh.read(length)
