"""A read that begins its walk at the section an earlier read stopped in (`SectionMark`):
the same entries as a walk from the header, without touching the sections before it; a
mark that does not check out is ignored."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from publisher.commitlog.errors import CorruptSegmentError
from publisher.commitlog.segment import SectionMark, SegmentReader

from support.paths import COMMITLOG_FIXTURES

SETS = ["v7", "v7-lz4"]  # a plain segment and a compressed one


def _segment(name: str) -> Path:
    return next((COMMITLOG_FIXTURES / name).glob("CommitLog-*.log"))


def _two_reads(path: Path, take: int) -> tuple[list, SegmentReader]:
    """The first `take` entries of `path` (the reader then closed, as the agent closes it
    at its batch limit) and the reader."""
    reader = SegmentReader(path)
    entries = reader.entries()
    first = [next(entries) for _ in range(take)]
    entries.close()
    return first, reader


@pytest.mark.parametrize("name", SETS)
def test_a_read_from_a_mark_gives_what_a_read_from_the_header_gives(name: str) -> None:
    path = _segment(name)
    everything = list(SegmentReader(path).entries())
    assert len(everything) > 100
    head = SegmentReader(path).descriptor.header_length
    for take in (1, len(everything) // 3, len(everything) - 1):
        first, reader = _two_reads(path, take)
        assert reader.section.file_offset >= head
        rest = list(SegmentReader(path, resume_from=first[-1][1],
                                  start=reader.section).entries())
        assert first + rest == everything, take
    whole = SegmentReader(path)
    list(whole.entries())
    assert whole.section.file_offset > head  # read to its end: the mark is past it all
    assert list(SegmentReader(path, resume_from=whole.last_position,
                              start=whole.section).entries()) == []


@pytest.mark.parametrize("name", SETS)
def test_the_walk_begins_at_the_mark(name: str, tmp_path: Path) -> None:
    path = shutil.copy(_segment(name), tmp_path / _segment(name).name)
    everything = list(SegmentReader(path).entries())
    first, reader = _two_reads(path, len(everything) // 2)
    head = reader.descriptor.header_length
    assert reader.section.file_offset > head  # past the first section
    with open(path, "r+b") as fh:  # the first section's marker CRC damaged
        fh.seek(head + 4)
        byte = fh.read(1)
        fh.seek(head + 4)
        fh.write(bytes([byte[0] ^ 0xFF]))
    with pytest.raises(CorruptSegmentError, match="sync marker CRC mismatch"):
        list(SegmentReader(path).entries())
    rest = list(SegmentReader(path, resume_from=first[-1][1], start=reader.section).entries())
    assert first + rest == everything


@pytest.mark.parametrize("name", SETS)
def test_a_mark_that_is_not_a_marker_is_ignored(name: str) -> None:
    path = _segment(name)
    everything = list(SegmentReader(path).entries())
    first, reader = _two_reads(path, len(everything) // 2)
    wrong = SectionMark(reader.section.file_offset + 1, reader.section.logical + 1)
    again = SegmentReader(path, resume_from=first[-1][1], start=wrong)
    assert first + list(again.entries()) == everything
    beyond = SectionMark(again.file_size + 100, again.file_size + 100)  # past the file
    assert list(SegmentReader(path, start=beyond).entries()) == everything
