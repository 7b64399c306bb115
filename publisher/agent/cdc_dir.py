"""The cdc_raw directory: which segments are there, in id order, and retiring finished ones."""

from __future__ import annotations

import contextlib
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from publisher.agent.cdc_index import CdcIndex, index_path, read_cdc_index
from publisher.commitlog.descriptor import parse_name


@dataclass
class SegmentFile:
    """One `CommitLog-<v>-<id>.log` in cdc_raw with its index, if any."""

    path: Path
    version: int
    segment_id: int
    index: CdcIndex | None


def list_segments(cdc_raw: Path) -> list[SegmentFile]:
    """Every segment in cdc_raw, oldest (lowest id) first, with its current idx."""
    out = []
    for path in cdc_raw.glob("CommitLog-*.log"):
        named = parse_name(path)
        if named is None:
            continue
        out.append(SegmentFile(path, named[0], named[1], read_cdc_index(path)))
    out.sort(key=lambda s: s.segment_id)
    return out


def retire(segment: SegmentFile, archive_dir: Path | None) -> None:
    """Delete (or move to `archive_dir`) a finished segment and its idx. This frees CDC
    space: Cassandra counts cdc_raw's size against cdc_total_space."""
    idx = index_path(segment.path)
    if archive_dir is not None:
        archive_dir.mkdir(parents=True, exist_ok=True)
        _archive(segment.path, archive_dir)
        if idx.exists():
            _archive(idx, archive_dir)
        return
    segment.path.unlink(missing_ok=True)
    idx.unlink(missing_ok=True)


def _archive(path: Path, archive_dir: Path) -> None:
    """Move `path` into `archive_dir` under its name, or under `<name>.<n>` when that name
    is taken by another file. A node that restarts replays its commit log and links a
    segment it had already handed to cdc_raw there again, so the archive may hold the same
    file (one inode) under the same name: rename() then does nothing and succeeds, which
    left the segment in cdc_raw to be published again and again. The copy is dropped."""
    target = archive_dir / path.name
    n = 0
    while target.exists():
        if target.samefile(path):
            path.unlink()
            return
        n += 1
        target = archive_dir / f"{path.name}.{n}"
    shutil.move(str(path), target)


def remove_orphan_indexes(cdc_raw: Path) -> int:
    """Delete idx files whose segment is gone (a crash between the two deletes)."""
    removed = 0
    for idx in cdc_raw.glob("CommitLog-*_cdc.idx"):
        log = idx.with_name(idx.name.replace("_cdc.idx", ".log"))
        if not log.exists():
            idx.unlink(missing_ok=True)
            removed += 1
    return removed


def directory_bytes(cdc_raw: Path) -> int:
    """Bytes used by cdc_raw (what Cassandra counts against cdc_total_space)."""
    total = 0
    with os.scandir(cdc_raw) as entries:
        for entry in entries:
            with contextlib.suppress(FileNotFoundError):
                total += entry.stat().st_size
    return total
