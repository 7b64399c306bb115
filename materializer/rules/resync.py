"""What a resync's scan of a partition says the stream holds wrongly (pure): the rows and
cells of the merged state the scan did not show, written before the scan began.

A resync reads a token range of the table with every cell's write time, as a snapshot does,
and each row it shows merges last-write-wins like any record: a cell the stream missed or
holds stale gets its event. What that merge cannot do is remove: a row or cell the table no
longer has (a delete the stream never saw) is simply not in the scan. So once a range's
scan is through, the partitions of the range that the store holds are compared with what
the scan showed of them: what it did not show and was written before the scan began (less
a clock margin: `cutoff_us`) is gone from the table, and these records remove it through
the ordinary merge, with the ordinary events (`d` for a row, `u` for a cell). What was
written at or after the cutoff is the live stream's: a write during the scan may or may not
be in what the scan read, and its own record decides.

The removals are tombstones at the removed data's own write times (a row deletion at the
row's newest time before the cutoff, a cell tombstone at the cell's time: a tombstone wins a
tie), so they shadow exactly what the scan did not show and nothing written later, in
whatever order they meet the live records. Counter cells are left alone (a scan reads no
write time for them).
"""

from __future__ import annotations

from typing import Any

from materializer.rules.model import CellKey, Clustering, PartitionState, RowState

# What a scan showed of one partition: each row's clustering (STATIC: the static row) →
# the cells it showed (column, cell path). A row shown with no regular cell maps to an
# empty set.
STATIC: Clustering = ()
Shown = dict[Clustering, frozenset[CellKey]]


def removals(state: PartitionState, shown: Shown, cutoff_us: int, at_s: int,
             counters: frozenset[str] = frozenset()) -> list[dict[str, Any]]:
    """The removals of a partition's state (every page's rows in `state.rows`) that a scan
    showing `shown` implies, as RowUpdate fields (kind, clustering, deletion, liveness,
    cells, complex_deletions) for the caller to complete with the partition's own
    (`at_s`: the local deletion time they carry)."""
    out = []
    if state.static is not None:
        cells = _unshown_cells(state.static, shown.get(STATIC), cutoff_us, at_s, counters)
        if cells:
            out.append(_record("STATIC_ROW", [], None, cells))
    for ck, row in state.rows.items():
        seen = shown.get(ck)
        if seen is None:  # the row is gone from the table, as of the scan
            newest = _newest_before(row, cutoff_us, counters)
            if newest is not None:
                out.append(_record("ROW", list(ck), (newest, at_s), []))
            continue
        cells = _unshown_cells(row, seen, cutoff_us, at_s, counters)
        if cells:
            out.append(_record("ROW", list(ck), None, cells))
    return out


def _newest_before(row: RowState, cutoff_us: int, counters: frozenset[str]) -> int | None:
    """The newest write time in the row before the cutoff (None: nothing before it)."""
    times = [c[1] for (column, _p), c in row.cells.items()
             if c[1] < cutoff_us and column not in counters]
    if row.liveness is not None and row.liveness[0] < cutoff_us:
        times.append(row.liveness[0])
    return max(times) if times else None


def _unshown_cells(row: RowState, seen: frozenset[CellKey] | None, cutoff_us: int,
                   at_s: int, counters: frozenset[str]) -> list[dict[str, Any]]:
    """Tombstones of the live cells of `row` the scan did not show (`seen` None: none),
    written before the cutoff."""
    return [{"column": column, "path": path, "value": None, "timestamp": cell[1], "ttl": 0,
             "local_deletion_time": at_s, "tombstone": True}
            for (column, path), cell in row.cells.items()
            if not cell[4] and cell[1] < cutoff_us and column not in counters
            and (seen is None or (column, path) not in seen)]


def _record(kind: str, clustering: list[bytes | None], deletion: tuple[int, int] | None,
            cells: list[dict[str, Any]]) -> dict[str, Any]:
    return {"kind": kind, "clustering": clustering, "shadowable": False, "range": None,
            "deletion": None if deletion is None else {"marked_for_delete_at": deletion[0],
                                                       "local_deletion_time": deletion[1]},
            "liveness": None, "cells": cells, "complex_deletions": []}
