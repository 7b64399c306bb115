"""Following a live segment: the CPU of the agent's read of a segment that gains sync
sections, from the section the last read stopped in (`SectionMark`, what the agent does)
and from the header (what it did before: every pass walked every marker so far).

Cassandra marks what it has written about every 100 ms under writes (`_cdc.idx` follows),
so a 4-MiB segment of a node at a few hundred writes/s holds thousands of sections (3,019
counted in one of the test ring's). The benchmark frames the plain fixture segment's
entries one per section into a segment of SECTIONS sections (its markers' CRCs for the new
offsets), then reads it as the agent follows a live one: a pass per section, each up to
that section's end (the idx offset) from the last entry read. Prints CPU per pass at the
start and at the end of the segment, and in all, both ways, one core.
"""

from __future__ import annotations

import os
import struct
import time
import zlib
from pathlib import Path

from publisher.commitlog.segment import SectionMark, SegmentReader

from support.paths import COMMITLOG_FIXTURES

SECTIONS = int(os.environ.get("FOLLOW_SECTIONS", "3000"))


def _framed(tmp: Path) -> Path:
    """A plain segment of SECTIONS sections of one fixture entry each (entries reused)."""
    source = next((COMMITLOG_FIXTURES / "v7").glob("CommitLog-*.log"))
    reader = SegmentReader(source)
    entries = list(reader.entries())
    data = source.read_bytes()
    head = reader.descriptor.header_length
    seg_id = reader.descriptor.segment_id
    out = bytearray(data[:head])
    for i in range(SECTIONS):
        start, end, _payload = entries[i % len(entries)]
        body = data[start:end]
        offset = len(out)
        nxt = offset + 8 + len(body)
        crc = zlib.crc32(struct.pack(">IIi", seg_id & 0xFFFFFFFF, seg_id >> 32, offset))
        out += struct.pack(">iI", nxt, crc) + body
    out += b"\0" * 8  # the zero marker after the last synced section
    path = tmp / source.name
    path.write_bytes(bytes(out))
    return path


def _follow(path: Path, ends: list[int], marks: bool) -> list[float]:
    """CPU seconds of each pass: one per section end in `ends` (the idx offset then)."""
    position, mark, used = 0, None, []
    for until in ends:
        started = time.process_time()
        reader = SegmentReader(path, until=until, resume_from=position,
                               start=mark if marks else None)
        for entry in reader.entries():
            position = entry[1]
        mark = reader.section
        used.append(time.process_time() - started)
    return used


def test_bench_segment_follow(tmp_path: Path) -> None:
    path = _framed(tmp_path)
    reader = SegmentReader(path)
    ends = [end for _start, end, _payload in reader.entries()]
    assert len(ends) == SECTIONS
    tenth = max(1, SECTIONS // 10)
    print(f"\nfollowing a segment of {SECTIONS:,} sections of one entry each, a pass per "
          f"section (CPU, one core):")
    for marks in (True, False):
        used = _follow(path, ends, marks)
        first, last = used[:tenth], used[-tenth:]
        where = "the last read's section" if marks else "the header"
        print(f"  from {where}: "
              f"{1e6 * sum(first) / len(first):,.0f} µs a pass over the first tenth, "
              f"{1e6 * sum(last) / len(last):,.0f} µs over the last; "
              f"{sum(used):.2f} s in all")
    # the passes read every entry once, either way
    marked = SegmentReader(path, resume_from=ends[SECTIONS // 2],
                           start=SectionMark(ends[SECTIONS // 2], ends[SECTIONS // 2]))
    assert [e[1] for e in marked.entries()] == ends[SECTIONS // 2 + 1:]
