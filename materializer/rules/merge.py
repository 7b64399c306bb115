"""Cassandra's reconciliation rules applied to one partition's state
(docs/architecture.md "Merge rules").

`apply` folds one RowUpdate (the dict `shared.rowupdate_reader.read_row_update` returns) into a
PartitionState. The result depends only on the set of records applied, not on their order
or repetition: deletions take the maximum, cells reconcile as Cassandra's `Cells.reconcile`
does (db/rows/Cells.java, 4.0+), liveness as `LivenessInfo.supersedes`, and whatever a
deletion shadows is dropped at once (it could never become visible again).
Time-dependent work (TTL expiry, tombstone purge) lives in `image` and `purge`.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from typing import Any

from materializer.rules.clustering import ClusteringOrder
from materializer.rules.model import (
    Cell,
    Clustering,
    Deletion,
    Liveness,
    PartitionState,
    RangeDeletion,
    RowState,
)
from shared.rowupdate import MIN_TS, record_timestamp

__all__ = ["MIN_TS", "Merger", "record_timestamp"]  # the record order lives with the format


def _deletion(d: dict[str, Any] | None) -> Deletion | None:
    return None if d is None else (d["marked_for_delete_at"], d["local_deletion_time"])


def _later(a: Deletion | None, b: Deletion | None) -> Deletion | None:
    """The deletion that wins: higher mark, then later local deletion time."""
    if a is None:
        return b
    if b is None:
        return a
    return a if (a[0], a[1] or 0) >= (b[0], b[1] or 0) else b


def liveness_supersedes(a: Liveness, b: Liveness) -> bool:
    """LivenessInfo.supersedes: higher timestamp; on a tie an expired (tombstone) info, then
    an expiring one, then the later expiration time."""
    if a[0] != b[0]:
        return a[0] > b[0]
    a_exp, b_exp = a[1] == EXPIRED, b[1] == EXPIRED
    if a_exp != b_exp:
        return a_exp
    if bool(a[1]) == bool(b[1]):
        return (a[2] or 0, a[1]) > (b[2] or 0, b[1])
    return bool(a[1])


EXPIRED = 2**31 - 1


def reconcile(a: Cell, b: Cell, counter: bool = False) -> Cell:
    """The winner of two versions of one cell (commutative: ties broken on every field)."""
    if counter:
        return _reconcile_counter(a, b)
    if a[1] != b[1]:
        return a if a[1] > b[1] else b
    a_dead, b_dead = a[3] is not None, b[3] is not None  # expiring or tombstone
    if a_dead or b_dead:
        if a_dead != b_dead:
            return a if a_dead else b
        if a[4] != b[4]:  # a tombstone beats an expiring cell
            return a if a[4] else b
        if a[3] != b[3]:
            return a if a[3] > b[3] else b
    av, bv = a[0] or b"", b[0] or b""
    if av != bv:
        return a if av > bv else b
    return a if (a[2], a[4]) >= (b[2], b[4]) else b


def _reconcile_counter(a: Cell, b: Cell) -> Cell:
    if a[4] or b[4]:  # a counter tombstone always wins (CASSANDRA-7346)
        if a[4] and b[4]:
            return a if a[1] >= b[1] else b
        return a if a[4] else b
    if not a[0] or not b[0]:
        if bool(a[0]) != bool(b[0]):
            return a if not a[0] else b
        return a if a[1] >= b[1] else b
    return (merge_counter_contexts(a[0], b[0]), max(a[1], b[1]), 0, None, False)


def merge_counter_contexts(a: bytes, b: bytes) -> bytes:
    """Union of two counter contexts' shards; per counter id the higher (clock, count)."""
    shards: dict[bytes, tuple[int, int]] = {}
    for ctx in (a, b):
        for cid, clock, count in _shards(ctx):
            old = shards.get(cid)
            if old is None or (clock, count) > old:
                shards[cid] = (clock, count)
    ids = sorted(shards)
    header = struct.pack(f">h{len(ids)}h", len(ids), *(i - 32768 for i in range(len(ids))))
    return header + b"".join(cid + struct.pack(">qq", *shards[cid]) for cid in ids)


def _shards(ctx: bytes) -> Iterable[tuple[bytes, int, int]]:
    (n,) = struct.unpack_from(">h", ctx, 0)
    body = 2 + 2 * abs(n)
    for p in range(body, len(ctx), 32):
        clock, count = struct.unpack_from(">qq", ctx, p + 16)
        yield ctx[p:p + 16], clock, count


class Merger:
    """Applies RowUpdates of one table to partition states."""

    def __init__(self, order: ClusteringOrder, counters: frozenset[str] = frozenset()) -> None:
        self.order = order
        self.counters = counters

    # ---- entry point ------------------------------------------------------------------------
    def apply(self, state: PartitionState, rec: dict[str, Any]) -> None:
        """Fold one RowUpdate into `state`."""
        kind = rec["kind"]
        if kind == "PARTITION_DELETION":
            self._partition_deletion(state, _deletion(rec["deletion"]))
        elif kind == "RANGE_TOMBSTONE":
            r, d = rec["range"], rec["deletion"]
            self._range(state, (tuple(r["start"]), r["start_inclusive"], tuple(r["end"]),
                                r["end_inclusive"], d["marked_for_delete_at"],
                                d["local_deletion_time"]))
        elif kind == "STATIC_ROW":
            if state.static is None:
                state.static = RowState()
            self._merge_row(state.static, rec)
            self._normalize(state.static, self._pd(state))
            if state.static.is_empty():
                state.static = None
        else:  # ROW, SNAPSHOT_ROW
            ck: Clustering = tuple(rec["clustering"])
            row = state.rows.get(ck)
            if row is None:
                row = state.rows[ck] = RowState()
            self._merge_row(row, rec)
            self._normalize(row, self.outer_deletion(state, ck))
            if row.is_empty():
                del state.rows[ck]

    # ---- deletions --------------------------------------------------------------------------
    @staticmethod
    def _pd(state: PartitionState) -> int:
        return state.deletion[0] if state.deletion is not None else MIN_TS

    def outer_deletion(self, state: PartitionState, ck: Clustering) -> int:
        """The newest partition or range deletion mark covering row `ck`."""
        ts = self._pd(state)
        for start, s_incl, end, e_incl, mark, _ in state.ranges:
            if mark > ts and self.order.in_range(ck, start, s_incl, end, e_incl):
                ts = mark
        return ts

    def _partition_deletion(self, state: PartitionState, d: Deletion | None) -> None:
        new = _later(state.deletion, d)
        if new == state.deletion:
            return
        state.deletion = new
        pd = new[0]
        state.ranges = [r for r in state.ranges if r[4] > pd]
        if state.static is not None:
            self._normalize(state.static, pd)
            if state.static.is_empty():
                state.static = None
        for ck in list(state.rows):
            self._renormalize(state, ck)

    def _range(self, state: PartitionState, rng: RangeDeletion) -> None:
        if rng[4] <= self._pd(state):
            return
        bounds = rng[:4]
        for i, old in enumerate(state.ranges):
            if old[:4] == bounds:
                if (old[4], old[5] or 0) >= (rng[4], rng[5] or 0):
                    return
                state.ranges[i] = rng
                break
        else:
            state.ranges.append(rng)
        for ck in list(state.rows):
            if self.order.in_range(ck, *bounds):
                self._renormalize(state, ck)

    def _renormalize(self, state: PartitionState, ck: Clustering) -> None:
        row = state.rows[ck]
        self._normalize(row, self.outer_deletion(state, ck))
        if row.is_empty():
            del state.rows[ck]

    # ---- rows -------------------------------------------------------------------------------
    def _merge_row(self, row: RowState, rec: dict[str, Any]) -> None:
        row.deletion = _later(row.deletion, _deletion(rec["deletion"]))
        live = rec["liveness"]
        if live is not None:
            new = (live["timestamp"], live["ttl"], live["local_expiration_time"])
            if row.liveness is None or liveness_supersedes(new, row.liveness):
                row.liveness = new
        for d in rec["complex_deletions"]:
            name = d["column"]
            row.complex[name] = _later(row.complex.get(name),  # type: ignore[assignment]
                                       (d["marked_for_delete_at"], d["local_deletion_time"]))
        cells = row.cells
        counters = self.counters
        for c in rec["cells"]:
            key = (c["column"], c["path"])
            new_cell = (c["value"], c["timestamp"], c["ttl"], c["local_deletion_time"],
                        c["tombstone"])
            old = cells.get(key)
            cells[key] = new_cell if old is None else reconcile(old, new_cell,
                                                                 key[0] in counters)

    @staticmethod
    def _normalize(row: RowState, outer: int) -> None:
        """Drop what `outer` (a partition/range deletion mark) or the row's own deletions
        shadow: Cassandra's `DeletionTime.deletes` (timestamp <= mark)."""
        if row.deletion is not None and row.deletion[0] <= outer:
            row.deletion = None
        cutoff = max(outer, row.deletion[0]) if row.deletion is not None else outer
        if row.liveness is not None and row.liveness[0] <= cutoff:
            row.liveness = None
        if cutoff == MIN_TS and not row.complex:
            return  # nothing can be shadowed: the common case, no dict rebuilt
        if row.complex:
            row.complex = {k: d for k, d in row.complex.items() if d[0] > cutoff}
        if row.cells:
            cx = row.complex
            row.cells = {k: c for k, c in row.cells.items()
                         if c[1] > (max(cutoff, cx[k[0]][0]) if k[0] in cx else cutoff)}
