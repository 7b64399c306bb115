"""Durable per-segment progress (rocksdict): acknowledged watermark, kept-back mutations."""

from __future__ import annotations

import json
from array import array
from dataclasses import dataclass, field
from pathlib import Path

from rocksdict import AccessType, Options, Rdict


@dataclass
class SegmentState:
    """Progress of one segment: everything up to `watermark` is acknowledged by Kafka;
    `kept_back` holds the start offsets of mutations not published (unknown table)."""

    watermark: int = 0
    kept_back: set[int] = field(default_factory=set)


class StateInUse(Exception):
    """Another process holds the store (another agent on the same `state.path`)."""


class OffsetStore:
    """A small RocksDB database of SegmentStates keyed by segment id."""

    def __init__(self, path: Path, read_only: bool = False) -> None:
        """Open (creating it if needed) the store; `read_only` works beside a running agent."""
        self.path = path
        self.read_only = read_only
        if read_only:
            self._db = Rdict(str(path), Options(raw_mode=True),
                             access_type=AccessType.read_only())
        else:
            path.mkdir(parents=True, exist_ok=True)
            try:
                self._db = Rdict(str(path), Options(raw_mode=True))
            except Exception as exc:
                if "lock" not in str(exc).lower():
                    raise
                raise StateInUse(f"state.path {path.parent} is in use: another agent runs "
                                 f"with it (its lock: {exc})") from None

    def get(self, segment_id: int) -> SegmentState:
        """The saved state, or a fresh one."""
        raw = self._db.get(_key(b"seg", segment_id))
        if raw is None:
            return SegmentState()
        kept = self._db.get(_key(b"kept", segment_id))
        return SegmentState(json.loads(raw)["watermark"],
                            set(array("q", kept)) if kept else set())

    def put(self, segment_id: int, state: SegmentState, kept_changed: bool = True) -> None:
        """Save a segment's state (the kept-back set only when it changed)."""
        self._db[_key(b"seg", segment_id)] = json.dumps(
            {"watermark": state.watermark, "kept_back": len(state.kept_back)}).encode()
        if kept_changed:
            self._db[_key(b"kept", segment_id)] = array("q", sorted(state.kept_back)).tobytes()

    def forget(self, segment_id: int) -> None:
        """Drop a finished segment's state."""
        for prefix in (b"seg", b"kept"):
            key = _key(prefix, segment_id)
            if self._db.get(key) is not None:
                del self._db[key]

    def segments(self) -> dict[int, SegmentState]:
        """All saved states."""
        keys = list(self._db.keys())
        return {int(key[4:]): self.get(int(key[4:])) for key in keys if key.startswith(b"seg:")}

    def flush(self) -> None:
        """Make every put durable: fsync the write-ahead log (no memtable flush, which would
        write a new table file each time)."""
        self._db.flush_wal(sync=True)

    def close(self) -> None:
        """Flush and close the database."""
        if not self.read_only:
            self.flush()
        self._db.close()


def _key(prefix: bytes, segment_id: int) -> bytes:
    return prefix + b":%020d" % segment_id
