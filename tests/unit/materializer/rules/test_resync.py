"""A resync's removals (materializer.rules.resync): a stream that missed any of a partition's
records, given the scan of the table's partition (its visible rows with their cells' write
times, merged like a snapshot's) and then the removals of what the scan did not show, shows
what the table shows; and nothing written at or after the scan's cutoff is removed."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from materializer.rules.image import partition_images
from materializer.rules.merge import Merger
from materializer.rules.model import PartitionState, RowState
from materializer.rules.resync import STATIC, Shown, removals

from support.records import NOW, ORDER, cell, fold, i32, record, record_st

CUTOFF = 100  # every record's time is below it (record_st: 1 to 12)


def _live(row: RowState) -> list[dict[str, Any]]:
    """A row's cells a read at NOW returns, with their write times (as a scan reads them)."""
    return [cell(column, c[1], c[0], path, c[2], c[3])
            for (column, path), c in row.cells.items()
            if not c[4] and not (c[2] and c[3] is not None and c[3] <= NOW)]


def _scan(table: PartitionState) -> tuple[list[dict[str, Any]], Shown]:
    """The scan of the table's partition: its visible rows as records, and what it shows."""
    images = partition_images(table, NOW)
    recs, shown = [], {}
    if table.static is not None and _live(table.static):
        cells = _live(table.static)
        recs.append(record("STATIC_ROW", cells=cells))
        shown[STATIC] = frozenset((c["column"], c["path"]) for c in cells)
    for ck, row in table.rows.items():
        if ck not in images:
            continue
        cells = _live(row)
        live = row.liveness
        rec = record("ROW", ck, cells=cells)
        if live is not None:
            rec["liveness"] = {"timestamp": live[0], "ttl": live[1],
                               "local_expiration_time": live[2]}
        recs.append(rec)
        shown[ck] = frozenset((c["column"], c["path"]) for c in cells)
    return recs, shown


def _resynced(stream_records: list[dict[str, Any]], table: PartitionState,
              cutoff: int = CUTOFF) -> PartitionState:
    stream = fold(stream_records)
    scan, shown = _scan(table)
    merger = Merger(ORDER)
    for rec in scan:
        merger.apply(stream, rec)
    for rec in removals(stream, shown, cutoff, NOW):
        merger.apply(stream, rec)
    return stream


@settings(max_examples=400, deadline=None)
@given(st.lists(record_st(), max_size=10), st.data())
def test_a_stream_that_missed_records_shows_the_table_after_the_scan_and_removals(
        records: list[dict[str, Any]], data: st.DataObject) -> None:
    kept = data.draw(st.lists(st.booleans(), min_size=len(records), max_size=len(records)))
    stream = [r for r, keep in zip(records, kept, strict=True) if keep]
    table = fold(records)
    assert partition_images(_resynced(stream, table), NOW) == partition_images(table, NOW)


def test_a_row_deleted_unseen_goes_with_a_d_and_a_row_the_scan_shows_stays() -> None:
    stream = [record("ROW", (i32(1),), cells=[cell("a", 5, i32(1))]),
              record("ROW", (i32(2),), cells=[cell("a", 6, i32(2)), cell("b", 6, b"", i32(9))])]
    # the table: row 1 deleted (the stream missed it), row 2's set element 9 removed
    deleted = record("ROW", (i32(1),), deletion={"marked_for_delete_at": 7,
                                                 "local_deletion_time": NOW})
    removed = record("ROW", (i32(2),), cells=[cell("b", 8, None, i32(9), ldt=NOW,
                                                   tombstone=True)])
    table = fold([*stream, deleted, removed])
    state = fold(stream)
    _, shown = _scan(table)
    out = removals(state, shown, CUTOFF, NOW)
    assert [(r["kind"], r["clustering"], r["deletion"], [(c["column"], c["path"], c["timestamp"])
                                                         for c in r["cells"]]) for r in out] == [
        ("ROW", [i32(1)], {"marked_for_delete_at": 5, "local_deletion_time": NOW}, []),
        ("ROW", [i32(2)], None, [("b", i32(9), 6)])]


def test_what_was_written_at_or_after_the_cutoff_is_left_to_the_live_stream() -> None:
    # row 1: one cell before the cutoff, one after (a write during the scan, not in what it
    # read); row 3: only after. Nothing of either is shown.
    stream = [record("ROW", (i32(1),), cells=[cell("a", 5, i32(1)), cell("b", 150, b"", i32(4))]),
              record("ROW", (i32(3),), cells=[cell("a", 120, i32(3))])]
    state = fold(stream)
    out = removals(state, {}, CUTOFF, NOW)
    assert [(r["clustering"], r["deletion"]) for r in out] == [
        ([i32(1)], {"marked_for_delete_at": 5, "local_deletion_time": NOW})]
    merger = Merger(ORDER)
    for rec in out:
        merger.apply(state, rec)
    assert partition_images(state, NOW) == {(i32(1),): {"b": ((i32(4), b""),)},
                                            (i32(3),): {"a": i32(3)}}


def test_counter_cells_are_left_alone() -> None:
    state = fold([record("ROW", (i32(1),), cells=[cell("a", 5, b"\x00" * 8)])])
    assert removals(state, {}, CUTOFF, NOW, counters=frozenset({"a"})) == []
