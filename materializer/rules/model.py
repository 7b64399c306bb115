"""The materializer's state for one Cassandra partition, and its compact byte form.

Everything is plain tuples, dicts and ints so that a state serializes with the standard
library alone (no class of ours is pickled: a code change never makes old state unreadable)
and merges without allocation-heavy objects. Times: timestamps and deletion marks in µs
(Cassandra write time), local deletion / expiration times in seconds, as on the wire.
"""

from __future__ import annotations

import gc
import pickle
from typing import Any

STATE_FORMAT = 2  # (1, before pages, came before casscade's first release: not read)
NO_TIME = None

Deletion = tuple[int, int | None]  # (marked_for_delete_at µs, local_deletion_time s)
Liveness = tuple[int, int, int | None]  # (timestamp µs, ttl s, local_expiration_time s)
Cell = tuple[bytes | None, int, int, int | None, bool]  # (value, ts, ttl, ldt, tombstone)
CellKey = tuple[str, bytes | None]  # (column, cell path)
Clustering = tuple[bytes | None, ...]
# (start values, start inclusive, end values, end inclusive, marked_for_delete_at, ldt)
RangeDeletion = tuple[Clustering, bool, Clustering, bool, int, int | None]
# A page of a wide partition's rows (materializer.rules.pages): page id, first and last clustering
# held, earliest TTL expiry in it (s) as of its last write, whether it held a live row then
PageRef = tuple[int, Clustering, Clustering, int | None, bool]

EXPIRED_LIVENESS_TTL = 2**31 - 1  # Cassandra's marker of an expired (tombstone) liveness


class RowState:
    """One merged row (or the static row): liveness, row deletion, cells, complex deletions."""

    __slots__ = ("cells", "complex", "deletion", "liveness")

    def __init__(self, liveness: Liveness | None = None, deletion: Deletion | None = None,
                 cells: dict[CellKey, Cell] | None = None,
                 complex_: dict[str, Deletion] | None = None) -> None:
        self.liveness = liveness
        self.deletion = deletion
        self.cells: dict[CellKey, Cell] = cells if cells is not None else {}
        self.complex: dict[str, Deletion] = complex_ if complex_ is not None else {}

    def is_empty(self) -> bool:
        """Nothing left in the row (it can be dropped from the state)."""
        return (self.liveness is None and self.deletion is None and not self.cells
                and not self.complex)

    def to_tuple(self) -> tuple:
        """Plain form for serialization and comparison."""
        return (self.liveness, self.deletion, self.cells, self.complex)

    @classmethod
    def from_tuple(cls, t: tuple) -> RowState:
        """Inverse of to_tuple."""
        return cls(t[0], t[1], t[2], t[3])


class PartitionState:
    """All that is known of one partition: deletions, static row, rows by clustering.

    A wide partition keeps its rows in pages (`materializer.rules.pages`): then `rows` holds only
    the rows of the pages loaded for this micro-batch, `pages` indexes all of them, and
    `unloaded_live` says whether a page not loaded holds a live row.
    """

    __slots__ = ("deletion", "evaluated_at", "last_purge", "loaded_pages", "next_expiry",
                 "next_page", "pages", "ranges", "rows", "static", "unloaded_live")

    def __init__(self) -> None:
        self.deletion: Deletion | None = None
        self.static: RowState | None = None
        self.ranges: list[RangeDeletion] = []
        self.rows: dict[Clustering, RowState] = {}
        self.evaluated_at = 0  # s: the time the last emitted images were computed at
        self.next_expiry: int | None = None  # s: earliest pending TTL expiry, if any
        self.last_purge = 0  # s
        self.pages: list[PageRef] = []  # empty: every row is in `rows`
        self.next_page = 1  # the id the next new page gets (page ids start at 1)
        self.loaded_pages: set[int] = set()  # not stored: pages whose rows are in `rows`
        self.unloaded_live = False  # not stored: a page not loaded holds a live row

    def is_empty(self) -> bool:
        """No data and no tombstone: the key's state can be removed."""
        return (self.deletion is None and self.static is None and not self.ranges
                and not self.rows and not self.pages)

    def canonical(self) -> tuple:
        """Order-free plain form of the merged data (times of evaluation excluded)."""
        return (self.deletion, self.static.to_tuple() if self.static else None,
                tuple(sorted(set(self.ranges), key=repr)),
                tuple(sorted(((k, r.to_tuple()) for k, r in self.rows.items()), key=repr)))

    def dumps(self, with_rows: bool = True) -> bytes:
        """Serialize (format byte + pickle of builtins only); a paged partition's own entry
        is written without rows (they are in the pages)."""
        rows = {k: r.to_tuple() for k, r in self.rows.items()} if with_rows else {}
        body = (self.deletion, self.static.to_tuple() if self.static else None, self.ranges,
                rows, self.evaluated_at, self.next_expiry, self.last_purge, self.pages,
                self.next_page)
        return bytes([STATE_FORMAT]) + pickle.dumps(body, protocol=5)

    @classmethod
    def loads(cls, data: bytes) -> PartitionState:
        """Inverse of dumps; refuses an unknown format byte."""
        if not data or data[0] != STATE_FORMAT:
            raise ValueError(f"unknown partition state format {data[:1]!r}")
        # A wide partition is hundreds of thousands of small acyclic objects: the cyclic
        # collector would scan them over and over while they are built (measured: half of
        # the load time at 10,000 rows), and none of them can form a cycle.
        enabled = gc.isenabled()
        gc.disable()
        try:
            body: Any = _SafeUnpickler.loads(data[1:])
            state = cls()
            state.deletion, static, state.ranges, rows = body[0], body[1], body[2], body[3]
            state.static = RowState.from_tuple(static) if static else None
            state.rows = rows_from_tuples(rows)
            state.evaluated_at, state.next_expiry, state.last_purge = body[4], body[5], body[6]
            state.pages, state.next_page = body[7], body[8]
        finally:
            if enabled:
                gc.enable()
        return state


def rows_to_bytes(rows: dict[Clustering, RowState]) -> bytes:
    """One page of rows, serialized (format byte + pickle of builtins only)."""
    return bytes([STATE_FORMAT]) + pickle.dumps({k: r.to_tuple() for k, r in rows.items()},
                                                protocol=5)


def rows_from_bytes(data: bytes) -> dict[Clustering, RowState]:
    """Inverse of rows_to_bytes; refuses an unknown format byte."""
    if not data or data[0] != STATE_FORMAT:
        raise ValueError(f"unknown page format {data[:1]!r}")
    enabled = gc.isenabled()
    gc.disable()  # as in PartitionState.loads
    try:
        return rows_from_tuples(_SafeUnpickler.loads(data[1:]))
    finally:
        if enabled:
            gc.enable()


def rows_from_tuples(rows: dict[Clustering, tuple]) -> dict[Clustering, RowState]:
    """Rows from their plain form."""
    return {k: RowState.from_tuple(r) for k, r in rows.items()}


class _SafeUnpickler(pickle.Unpickler):
    """Builtins only: a state blob can never name a class to construct."""

    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"state may not reference {module}.{name}")

    @classmethod
    def loads(cls, data: bytes) -> Any:
        import io

        return cls(io.BytesIO(data)).load()
