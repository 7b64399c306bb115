"""Parse a commit log segment's `_cdc.idx` file: the synced offset, then `COMPLETED`."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

INDEX_SUFFIX = "_cdc.idx"


@dataclass(frozen=True)
class CdcIndex:
    """What Cassandra says of a CDC segment: bytes safe to read, and whether it is final."""

    offset: int
    completed: bool


def parse_cdc_index(text: str) -> CdcIndex | None:
    """Parse idx file content; None when it is empty or half-written (read it again later).

    Cassandra truncates and rewrites the file on every sync, so a reader can catch it empty
    or mid-write: only a line that is all digits counts as an offset.
    """
    lines = text.split("\n")
    first = lines[0].strip()
    if not first.isdigit():
        return None
    completed = len(lines) > 1 and lines[1].strip() == "COMPLETED"
    return CdcIndex(offset=int(first), completed=completed)


def index_path(segment: Path) -> Path:
    """The `_cdc.idx` file that belongs to a `CommitLog-<v>-<id>.log` segment."""
    return segment.with_name(segment.stem + INDEX_SUFFIX)


def read_cdc_index(segment: Path) -> CdcIndex | None:
    """Read the idx of `segment`; None when it does not exist yet or is being rewritten."""
    try:
        return parse_cdc_index(index_path(segment).read_text(encoding="ascii", errors="replace"))
    except FileNotFoundError:
        return None
