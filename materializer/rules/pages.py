"""Wide partitions in pages: a micro-batch reads and writes only the rows it can change.

A partition's own state entry holds its deletions, static row and range tombstones. Up to
2 x `page_rows` rows it holds the rows too (the common case: one read, one write per key).
Beyond that the rows move into pages of `page_rows` rows each, stored as entries of their
own (page ids from 1), and the partition's entry keeps an index: per page its id, first and
last clustering, earliest TTL expiry and whether it held a live row. A page owns the
clusterings from its first up to the next page's first (the first page also everything
before it), so a new row always has exactly one page to go to.

Which pages a micro-batch loads (everything else stays unread and unwritten):
- a row's own page, for a row write;
- every page a range tombstone may cover;
- every page, for a partition deletion or a static row write (every row image holds the
  static columns), or when a static cell's TTL ran out;
- every page whose earliest expiry is due, so expiry is reported as without pages.
A page that grows past 2 x `page_rows` is split; an empty page is removed; when every page
is loaded and at most `page_rows` rows remain, the rows go back into the partition's entry.

Tombstones inside a page are purged when the page is loaded in a purge round (hourly or
gc_grace, whichever is shorter), not while it is never read; they stay bounded by the
rows written to the page.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence
from typing import Any

from materializer.rules.clustering import ClusteringOrder
from materializer.rules.image import row_is_live, row_values, rows_next_expiry
from materializer.rules.model import (
    Clustering,
    PageRef,
    PartitionState,
    RowState,
    rows_from_bytes,
    rows_to_bytes,
)

DEFAULT_PAGE_ROWS = 256
ALL_PAGES_KINDS = frozenset({"PARTITION_DELETION", "STATIC_ROW"})
PageWrites = dict[int, bytes | None]  # page id → new page bytes, or None to remove it


def pages_to_load(state: PartitionState, records: Iterable[dict[str, Any]], now_s: int,
                  order: ClusteringOrder) -> list[int]:
    """The ids of the pages the records (and the TTL expiry due by `now_s`) can change."""
    pages = state.pages
    if not pages:
        return []
    every = [p[0] for p in pages]
    if state.static is not None and _due(rows_next_expiry([state.static], state.evaluated_at),
                                         now_s):
        return every
    need = {p[0] for p in pages if _due(p[3], now_s)}
    firsts = [order.key(p[1]) for p in pages]
    for rec in records:
        kind = rec["kind"]
        if kind in ALL_PAGES_KINDS:
            return every
        if kind == "RANGE_TOMBSTONE":
            r = rec["range"]
            start, end = tuple(r["start"]), tuple(r["end"])
            need.update(p[0] for p in pages if order.may_overlap(
                p[1], p[2], start, r["start_inclusive"], end, r["end_inclusive"]))
        else:  # ROW, SNAPSHOT_ROW
            need.add(pages[_owner(firsts, order.key(tuple(rec["clustering"])))][0])
    return [pid for pid in every if pid in need]


def attach(state: PartitionState, page_ids: Sequence[int],
           blobs: Sequence[bytes | None], where: str) -> None:
    """Add the loaded pages' rows to the state; `where` names the partition in errors."""
    for pid, blob in zip(page_ids, blobs, strict=True):
        if blob is None:
            raise ValueError(f"{where}: page {pid} is in the partition's index but not in "
                             f"the state store (the checkpoint is damaged)")
        state.rows.update(rows_from_bytes(blob))
    state.loaded_pages = set(page_ids)
    state.unloaded_live = any(p[4] for p in state.pages if p[0] not in state.loaded_pages)


def store(state: PartitionState, order: ClusteringOrder, now_s: int,
          page_rows: int = DEFAULT_PAGE_ROWS) -> tuple[bytes | None, PageWrites]:
    """The partition's own entry (None: remove it) and the page writes after a batch."""
    writes: PageWrites = {}
    if not state.pages:
        if len(state.rows) <= 2 * page_rows:
            return (None if state.is_empty() else state.dumps()), writes
        state.pages = _new_pages(state, _sorted(state.rows, order), order, now_s, page_rows,
                                 writes)
    else:
        _rewrite_loaded(state, order, now_s, page_rows, writes)
    if not state.pages:  # every page emptied or folded back in
        return (None if state.is_empty() else state.dumps()), writes
    expiries = [p[3] for p in state.pages if p[3] is not None]
    if state.static is not None:
        expiries.append(rows_next_expiry([state.static], now_s))
    known = [e for e in expiries if e is not None]
    state.next_expiry = min(known) if known else None
    return state.dumps(with_rows=False), writes


def _rewrite_loaded(state: PartitionState, order: ClusteringOrder, now_s: int,
                    page_rows: int, writes: PageWrites) -> None:
    pages = state.pages
    firsts = [order.key(p[1]) for p in pages]
    held: dict[int, dict[Clustering, RowState]] = {pid: {} for pid in state.loaded_pages}
    for ck, row in state.rows.items():
        pid = pages[_owner(firsts, order.key(ck))][0]
        if pid not in held:  # pages_to_load and this rule disagree: a bug, never data loss
            raise RuntimeError(f"row {ck!r} belongs to page {pid}, which was not loaded")
        held[pid][ck] = row
    if len(held) == len(pages) and len(state.rows) <= page_rows:
        for pid in held:  # small again: back into the partition's entry
            writes[pid] = None
        state.pages = []
        return
    out: list[PageRef] = []
    for ref in pages:
        pid = ref[0]
        if pid not in held:
            out.append(ref)
            continue
        rows = held[pid]
        if not rows:
            writes[pid] = None
            continue
        items = _sorted(rows, order)
        if len(items) <= 2 * page_rows:
            out.append(_page(pid, items, now_s, writes))
        else:  # split: the first part keeps the id, the rest get new ones
            out.append(_page(pid, items[:page_rows], now_s, writes))
            out.extend(_new_pages(state, items[page_rows:], order, now_s, page_rows, writes))
    state.pages = out
    state.rows = {}


def _new_pages(state: PartitionState, items: list[tuple[Clustering, RowState]],
               order: ClusteringOrder, now_s: int, page_rows: int,
               writes: PageWrites) -> list[PageRef]:
    refs = []
    for i in range(0, len(items), page_rows):
        refs.append(_page(state.next_page, items[i:i + page_rows], now_s, writes))
        state.next_page += 1
    state.rows = {}
    return refs


def _page(pid: int, items: list[tuple[Clustering, RowState]], now_s: int,
          writes: PageWrites) -> PageRef:
    rows = dict(items)
    writes[pid] = rows_to_bytes(rows)
    live = any(row_is_live(r, row_values(r, now_s), now_s) for r in rows.values())
    return (pid, items[0][0], items[-1][0], rows_next_expiry(rows.values(), now_s), live)


def _sorted(rows: dict[Clustering, RowState],
            order: ClusteringOrder) -> list[tuple[Clustering, RowState]]:
    return sorted(rows.items(), key=lambda kv: order.key(kv[0]))


def _owner(firsts: list[Any], key: Any) -> int:
    """Index of the page owning a clustering: the last page whose first is <= it (or the
    first page, for a clustering before every page)."""
    return max(bisect.bisect_right(firsts, key) - 1, 0)


def _due(expiry: int | None, now_s: int) -> bool:
    return expiry is not None and expiry <= now_s
