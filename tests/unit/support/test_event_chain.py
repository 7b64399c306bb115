"""The stream checks the RF=3 tests and the soak make (support.ring_harness.event_chain):
every `before` is its key's previous `after`, on the table's columns now."""

from __future__ import annotations

from support.ring_harness import event_chain

KEY = {"k": 1}


def _event(offset: int, before: dict | None, after: dict | None, op: str = "u"
           ) -> tuple[int, int, dict, dict]:
    return (0, offset, KEY, {"op": op, "before": before, "after": after})


def test_a_column_added_since_the_previous_event_is_null_in_before_not_a_break() -> None:
    events = [_event(0, None, {"k": 1, "v": 1}, "c"),
              _event(1, {"k": 1, "v": 1, "added1": None}, {"k": 1, "v": 2, "added1": None})]
    assert event_chain(events) == ([], [])


def test_a_dropped_column_is_gone_from_before_not_a_break() -> None:
    events = [_event(0, None, {"k": 1, "v": 1, "gone": 5}, "c"),
              _event(1, {"k": 1, "v": 1}, {"k": 1, "v": 2})]
    assert event_chain(events) == ([], [])


def test_a_before_that_is_not_the_previous_after_is_named() -> None:
    events = [_event(0, None, {"k": 1, "v": 1}, "c"),
              _event(1, {"k": 1, "v": 7}, {"k": 1, "v": 2}),
              _event(2, {"k": 1, "v": 2, "added1": 3}, {"k": 1, "v": 3, "added1": 3}),
              (0, 3, KEY, None)]  # a tombstone is not an event of the chain
    no_ops, broken = event_chain(events)
    assert no_ops == []
    assert [b.split(": before")[0] for b in broken] == ['{"k": 1} @0/1', '{"k": 1} @0/2']


def test_an_event_with_no_visible_change_is_named() -> None:
    events = [_event(0, None, {"k": 1, "v": -0.0}, "c"),
              _event(1, {"k": 1, "v": -0.0}, {"k": 1, "v": 0.0}),  # -0.0 and 0.0 differ
              _event(2, {"k": 1, "v": 0.0}, {"k": 1, "v": 0.0})]
    no_ops, broken = event_chain(events)
    assert [n.split(": u ")[0] for n in no_ops] == ['{"k": 1} @0/2'] and broken == []


def _restated(offset: int, after: dict) -> tuple[int, int, dict, dict]:
    return (0, offset, KEY, {"op": "r", "before": None, "after": after,
                             "source": {"file": "truncate", "snapshot": "true"}})


def _truncate(offset: int) -> tuple[int, int, None, dict]:
    return (0, offset, None, {"op": "t", "before": None, "after": None})


def test_a_barrier_r_that_restates_the_row_of_an_event_after_the_truncate_is_no_break() -> None:
    # a micro-batch running when the driver wrote the truncate event commits after it; the
    # barrier's batch then writes the key's row again (docs/architecture.md)
    events = [_event(0, None, {"k": 1, "v": 1}, "c"), _truncate(1),
              _event(2, None, {"k": 1, "v": 2}, "c"), _restated(3, {"k": 1, "v": 2}),
              _event(4, {"k": 1, "v": 2}, {"k": 1, "v": 3})]
    assert event_chain(events) == ([], [])


def test_a_barrier_r_with_another_row_than_the_previous_event_is_named() -> None:
    events = [_truncate(0), _event(1, None, {"k": 1, "v": 2}, "c"),
              _restated(2, {"k": 1, "v": 9}),
              (0, 3, KEY, {"op": "r", "before": None, "after": {"k": 1, "v": 9},
                           "source": {"file": "CommitLog-7-1.log"}})]  # not the barrier's
    no_ops, broken = event_chain(events)
    assert no_ops == []
    assert [b.split(": before")[0] for b in broken] == ['{"k": 1} @0/2', '{"k": 1} @0/3']
