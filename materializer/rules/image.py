"""What a partition's state shows at a moment: the visible rows, TTL expiry and purging.

A row image maps every column that has a live value to its raw form: bytes for a simple
column, a tuple of (cell path, value) sorted by path for a non-frozen collection or UDT.
Images are compared raw; `materializer.output.values` turns them into typed values for events.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from materializer.rules.merge import EXPIRED
from materializer.rules.model import Clustering, PartitionState, RowState
from shared.codec import counter_total

RawValue = bytes | tuple[tuple[bytes, bytes | None], ...] | None
Image = dict[str, RawValue]
STATIC_ONLY: Clustering = ()  # the row SELECT shows for a partition with only static data


def row_values(row: RowState, now_s: int) -> Image:
    """Column → live raw value of one merged row (columns without a live cell absent)."""
    out: dict[str, list | bytes | None] = {}
    elements = False
    for (column, path), c in row.cells.items():
        # a cell is live unless a tombstone, or expiring (ttl) and expired by now; inline:
        # this runs for every cell of every image
        if c[4] or (c[2] and c[3] is not None and now_s >= c[3]):
            continue
        if path is None:
            out[column] = c[0]
        else:
            elements = True
            out.setdefault(column, []).append((path, c[0]))  # type: ignore[union-attr]
    if not elements:  # simple columns only: the dict is the image
        return out  # type: ignore[return-value]
    return {k: tuple(sorted(v)) if isinstance(v, list) else v for k, v in out.items()}


def row_is_live(row: RowState, values: Image, now_s: int) -> bool:
    """Live if its primary-key liveness is live, or any cell is."""
    if values:
        return True
    live = row.liveness
    return live is not None and live[1] != EXPIRED and (not live[1] or live[2] is None
                                                        or now_s < live[2])


def row_image(state: PartitionState, ck: Clustering, now_s: int,
              static: Image | None = None) -> Image | None:
    """The visible image of row `ck` (with the partition's static values), or None."""
    if static is None:
        static = row_values(state.static, now_s) if state.static is not None else {}
    if ck == STATIC_ONLY and ck not in state.rows:
        return dict(static) if static and not _any_live_row(state, now_s) else None
    row = state.rows.get(ck)
    if row is None:
        return None
    values = row_values(row, now_s)
    if not row_is_live(row, values, now_s):
        return None
    return {**static, **values} if static else values


def _any_live_row(state: PartitionState, now_s: int) -> bool:
    return state.unloaded_live or any(row_is_live(r, row_values(r, now_s), now_s)
                                      for k, r in state.rows.items() if k != STATIC_ONLY)


def partition_images(state: PartitionState, now_s: int) -> dict[Clustering, Image]:
    """Every visible row of the partition at `now_s`."""
    static = row_values(state.static, now_s) if state.static is not None else {}
    out = {}
    for ck, row in state.rows.items():
        values = row_values(row, now_s)
        if row_is_live(row, values, now_s):
            out[ck] = {**static, **values} if static else values
    if not out and static and not state.unloaded_live:
        out[STATIC_ONLY] = dict(static)
    return out


def next_expiry(state: PartitionState, now_s: int) -> int | None:
    """The earliest time (s) after `now_s` at which some live TTL'd cell or liveness
    expires, or None."""
    rows = list(state.rows.values()) + ([state.static] if state.static is not None else [])
    return rows_next_expiry(rows, now_s)


def rows_next_expiry(rows: Iterable[RowState], now_s: int) -> int | None:
    """The same over some rows."""
    best: int | None = None
    for row in rows:
        live = row.liveness
        if live is not None and live[1] and live[1] != EXPIRED and live[2] is not None \
                and live[2] > now_s:
            best = live[2] if best is None else min(best, live[2])
        for c in row.cells.values():
            if c[2] and not c[4] and c[3] is not None and c[3] > now_s:
                best = c[3] if best is None else min(best, c[3])
    return best


def record_expiry(rec: dict[str, Any], now_s: int) -> int | None:
    """The earliest time (s) after `now_s` at which something a RowUpdate wrote expires."""
    times = [c["local_deletion_time"] for c in rec["cells"]
             if c["ttl"] and not c["tombstone"] and c["local_deletion_time"] is not None]
    live = rec["liveness"]
    if live is not None and live["ttl"] and live["ttl"] != EXPIRED:
        times.append(live["local_expiration_time"])
    later = [t for t in times if t is not None and t > now_s]
    return min(later) if later else None


def forget_dropped(state: PartitionState, dropped: dict[str, int]) -> None:
    """Remove what Cassandra no longer reads after `ALTER TABLE ... DROP`: every cell and
    collection deletion of a dropped column written at or before its drop time (µs). A column
    added again later starts empty; its older cells never come back."""
    for row in [*state.rows.values(), state.static]:
        if row is None:
            continue
        row.cells = {k: c for k, c in row.cells.items()
                     if not (k[0] in dropped and c[1] <= dropped[k[0]])}
        row.complex = {k: d for k, d in row.complex.items()
                       if not (k in dropped and d[0] <= dropped[k])}


def drop_dropped(rec: dict[str, Any], dropped: dict[str, int]) -> None:
    """The same for a record about to be merged (a late copy written before the drop)."""
    rec["cells"] = [c for c in rec["cells"] if not (c["column"] in dropped and
                                                    c["timestamp"] <= dropped[c["column"]])]
    rec["complex_deletions"] = [d for d in rec["complex_deletions"] if not (
        d["column"] in dropped and d["marked_for_delete_at"] <= dropped[d["column"]])]


def purge(state: PartitionState, now_s: int, gc_grace_s: int) -> None:
    """Drop tombstones and expired data older than gc_grace_seconds, as compaction would:
    after that a late older copy may come back, exactly as in Cassandra itself."""
    limit = now_s - gc_grace_s

    def gone(ldt: int | None) -> bool:
        return ldt is not None and ldt < limit

    if state.deletion is not None and gone(state.deletion[1]):
        state.deletion = None
    state.ranges = [r for r in state.ranges if not gone(r[5])]
    for key, row in [*state.rows.items(), (None, state.static)]:
        if row is None:
            continue
        if row.deletion is not None and gone(row.deletion[1]):
            row.deletion = None
        if row.liveness is not None and row.liveness[1] and gone(row.liveness[2]):
            row.liveness = None
        row.complex = {k: d for k, d in row.complex.items() if not gone(d[1])}
        # tombstones, and expiring cells past expiry (they are tombstones by then)
        row.cells = {k: c for k, c in row.cells.items()
                     if not ((c[4] or c[2]) and gone(c[3]))}
        if row.is_empty():
            if key is None:
                state.static = None
            else:
                del state.rows[key]
    state.last_purge = now_s


class VisibleForm:
    """What a reader sees of an image, for deciding whether a change is visible.

    Raw images can differ where `SELECT` shows no difference: a list element's cell path is
    a timeuuid made at write time (the same list written twice has new paths), and a counter
    cell holds per-replica shards whose total is the value (an increment by 0 adds a shard
    clock). Seen at RF=3: such rewrites gave `u` events with before == after.
    """

    def __init__(self, lists: frozenset[str], counters: frozenset[str]) -> None:
        self.lists = lists
        self.counters = counters

    def same(self, a: Image, b: Image) -> bool:
        """True when images `a` and `b` show the same values to a reader."""
        if a == b:
            return True
        if not (self.lists or self.counters) or a.keys() != b.keys():
            return False
        return all(a[k] == b[k] or self._value(k, a[k]) == self._value(k, b[k]) for k in a)

    def _value(self, column: str, raw: RawValue) -> Any:
        if column in self.lists and isinstance(raw, tuple):
            return tuple(v for _path, v in raw)  # paths only order the elements
        if column in self.counters and isinstance(raw, bytes):
            return counter_total(raw)
        return raw
