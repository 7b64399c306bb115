"""Wide partitions in pages: the same events and rows as one state blob, fewer rows touched."""

from __future__ import annotations

import copy

from hypothesis import given, settings
from hypothesis import strategies as st

from materializer.rules.model import PartitionState, rows_from_bytes
from materializer.rules.pages import attach

from support.paged import Paged
from support.records import NOW, cell, i32, record, record_st

batches_st = st.lists(st.one_of(st.none(), st.lists(record_st(), min_size=1, max_size=6)),
                      min_size=1, max_size=8)


@settings(max_examples=300, deadline=None)
@given(batches_st)
def test_pages_give_the_same_events_and_rows_as_one_blob(batches: list) -> None:
    whole, paged = Paged(page_rows=10**6), Paged(page_rows=1)
    for i, batch in enumerate(batches):
        now = NOW - 4 + 2 * i  # TTL'd cells of the strategy expire around NOW
        assert paged.run(copy.deepcopy(batch), now) == whole.run(copy.deepcopy(batch), now)
        assert paged.visible(now) == whole.visible(now)
    assert not whole.pages  # the reference never pages


def wide(n: int, page_rows: int) -> Paged:
    p = Paged(page_rows)
    p.run([record("ROW", (i32(c),), cells=[cell("a", 1, i32(c))]) for c in range(n)], NOW)
    return p


def test_a_row_write_reads_and_writes_one_page() -> None:
    p = wide(100, page_rows=10)
    assert len(p.pages) == 10
    before = dict(p.pages)
    changes = p.run([record("ROW", (i32(55),), cells=[cell("a", 2, i32(0))])], NOW)
    assert [c[0] for c in changes] == ["u"]
    assert len(p.loaded) == 1
    assert sum(before[k] != v for k, v in p.pages.items()) == 1


def test_a_range_tombstone_reads_only_the_pages_it_covers() -> None:
    p = wide(100, page_rows=10)
    rt = record("RANGE_TOMBSTONE", deletion={"marked_for_delete_at": 5,
                                             "local_deletion_time": NOW},
                range={"start": [i32(12)], "start_inclusive": True, "end": [i32(27)],
                       "end_inclusive": False})
    changes = p.run([rt], NOW)
    assert [c[1] for c in changes] == [(i32(c),) for c in range(12, 27)]
    assert {c[0] for c in changes} == {"d"}
    assert len(p.loaded) == 2  # rows 10-19 and 20-29


def test_pages_split_when_they_grow_and_fold_back_when_small() -> None:
    p = wide(5, page_rows=2)  # 5 rows > 2 x 2: three pages
    assert len(p.pages) == 3
    p.run([record("ROW", (i32(c),), cells=[cell("a", 1, i32(c))]) for c in range(100, 110)],
          NOW)  # ten more rows, all after the last page's first: it splits
    assert max(len(rows_from_bytes(b)) for b in p.pages.values()) <= 4
    assert len(p.visible(NOW)) == 15
    p.run([record("PARTITION_DELETION", deletion={"marked_for_delete_at": 9,
                                                  "local_deletion_time": NOW})], NOW)
    assert not p.pages and p.visible(NOW) == {}
    p.run([record("ROW", (i32(1),), cells=[cell("a", 10, i32(1))])], NOW)
    assert not p.pages and len(p.visible(NOW)) == 1  # small again: one entry


def test_static_only_row_stays_hidden_while_an_unread_page_has_a_live_row() -> None:
    p = wide(6, page_rows=2)
    p.run([record("STATIC_ROW", cells=[cell("s", 1, i32(9))])], NOW)
    # delete row 0 (its page holds only dead rows then); rows 1-5 in unread pages live on
    changes = p.run([record("ROW", (i32(0),), deletion={"marked_for_delete_at": 3,
                                                          "local_deletion_time": NOW}),
                     record("ROW", (i32(1),), deletion={"marked_for_delete_at": 3,
                                                          "local_deletion_time": NOW})], NOW)
    assert len(p.loaded) == 1  # rows 0 and 1 share a page; 2-5 stay unread
    assert [(c[0], c[1]) for c in changes] == [("d", (i32(0),)), ("d", (i32(1),))]


def test_a_page_missing_from_the_store_is_a_loud_error() -> None:
    import pytest

    p = wide(10, page_rows=2)
    state = PartitionState.loads(p.entry)
    first = state.pages[0][0]
    with pytest.raises(ValueError, match=f"p.raw.ks.t key 07: page {first} is in the "):
        attach(state, [first], [None], "p.raw.ks.t key 07")
