"""Merge rules of the materializer: Cassandra's reconciliation, as properties and examples."""

from __future__ import annotations

import random
import struct
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from materializer.rules.clustering import ClusteringOrder
from materializer.rules.events import ChangeDetector, op_of
from materializer.rules.image import partition_images, purge
from materializer.rules.merge import Merger, merge_counter_contexts, reconcile
from materializer.rules.model import STATE_FORMAT, PartitionState
from shared import codec
from shared.schema import table_from_json

from support.records import NOW, ORDER, cell, fold, i32, record, record_st


# ---- a plain reference: evaluate the visible rows straight from all records ---------------
def reference_rows(records: list[dict[str, Any]], now: int) -> dict[tuple, dict]:
    def mark(d: dict | None) -> int:
        return d["marked_for_delete_at"] if d else -1

    pd = max((mark(r["deletion"]) for r in records if r["kind"] == "PARTITION_DELETION"),
             default=-1)
    ranges = [r for r in records if r["kind"] == "RANGE_TOMBSTONE"]

    def covered(ck: tuple) -> int:
        best = pd
        for r in ranges:
            g = r["range"]
            if ORDER.in_range(ck, tuple(g["start"]), g["start_inclusive"], tuple(g["end"]),
                              g["end_inclusive"]):
                best = max(best, mark(r["deletion"]))
        return best

    def values(rows: list[dict], cutoff: int) -> dict:
        best: dict = {}
        for r in rows:
            for c in r["cells"]:
                cx = max([cutoff] + [d["marked_for_delete_at"] for x in rows
                                     for d in x["complex_deletions"] if d["column"] == c["column"]])
                if c["timestamp"] <= cx:
                    continue
                t = (c["value"], c["timestamp"], c["ttl"], c["local_deletion_time"],
                     c["tombstone"])
                key = (c["column"], c["path"])
                best[key] = t if key not in best else reconcile(best[key], t)
        out: dict = {}
        for (col, path), c in best.items():
            if c[4] or (c[2] and now >= c[3]):
                continue
            if path is None:
                out[col] = c[0]
            else:
                out.setdefault(col, []).append((path, c[0]))
        return {k: tuple(sorted(v)) if isinstance(v, list) else v for k, v in out.items()}

    static = values([r for r in records if r["kind"] == "STATIC_ROW"], pd)
    result = {}
    for ck in {tuple(r["clustering"]) for r in records if r["kind"] == "ROW"}:
        rows = [r for r in records if r["kind"] == "ROW" and tuple(r["clustering"]) == ck]
        cutoff = max([covered(ck)] + [mark(r["deletion"]) for r in rows])
        vals = values(rows, cutoff)
        live = any(r["liveness"] and r["liveness"]["timestamp"] > cutoff for r in rows)
        if vals or live:
            result[ck] = {**static, **vals}
    if not result and static:
        result[()] = static
    return result


# ---- properties -----------------------------------------------------------------------------
@settings(max_examples=400, deadline=None)
@given(st.lists(record_st(), max_size=12), st.randoms(use_true_random=False))
def test_any_order_and_duplication_gives_the_same_state(records: list, rnd: random.Random
                                                        ) -> None:
    shuffled = records + rnd.sample(records, k=len(records) // 2)
    rnd.shuffle(shuffled)
    assert fold(shuffled).canonical() == fold(records).canonical()


@settings(max_examples=300, deadline=None)
@given(st.lists(record_st(), max_size=8), st.lists(record_st(), max_size=8),
       st.lists(record_st(), max_size=8))
def test_merge_is_associative(a: list, b: list, c: list) -> None:
    # (a + b) + c == a + (b + c): folding in either grouping ends in the same state
    assert fold(a + b + c).canonical() == fold(c + b + a).canonical()
    state = fold(a + b)
    for r in c:  # a fresh merger each time: all state is in the PartitionState
        Merger(ORDER).apply(state, r)
    assert state.canonical() == fold(a + b + c).canonical()


@settings(max_examples=400, deadline=None)
@given(st.lists(record_st(), max_size=12))
def test_visible_rows_equal_the_reference_evaluation(records: list) -> None:
    assert partition_images(fold(records), NOW) == reference_rows(records, NOW)


@settings(max_examples=200, deadline=None)
@given(st.lists(record_st(), max_size=10), st.randoms(use_true_random=False))
def test_events_do_not_depend_on_arrival_order_within_a_batch(records: list,
                                                              rnd: random.Random) -> None:
    def events(recs: list) -> list:
        proc = ChangeDetector(Merger(ORDER), has_static=True, gc_grace_s=10**6)
        raw = [(r, repr(sorted(r.items())).encode()) for r in recs]
        return [(c.op, c.clustering, c.before, c.after)
                for c in proc.process(PartitionState(), raw, NOW)]

    copies = records * 3
    rnd.shuffle(copies)
    assert events(copies) == events(records)


@settings(max_examples=200, deadline=None)
@given(st.lists(record_st(), max_size=10), st.integers(1, 4))
def test_replaying_the_events_rebuilds_the_visible_rows(records: list, batches: int) -> None:
    proc = ChangeDetector(Merger(ORDER), has_static=True, gc_grace_s=10**6)
    state, seen = PartitionState(), {}
    size = max(1, len(records) // batches)
    for i in range(0, len(records), size):
        chunk = [(r, str(j).encode()) for j, r in enumerate(records[i:i + size])]
        for ch in proc.process(state, chunk, NOW):
            assert seen.get(ch.clustering) == ch.before  # each before is the last after
            if ch.after is None:
                seen.pop(ch.clustering, None)
            else:
                seen[ch.clustering] = ch.after
    assert seen == partition_images(state, NOW)


# ---- examples -------------------------------------------------------------------------------
def test_cell_reconcile_follows_cassandra() -> None:
    live = (i32(1), 5, 0, None, False)
    assert reconcile(live, (i32(0), 6, 0, None, False))[1] == 6  # higher timestamp
    tomb = (None, 5, 0, 100, True)
    expiring = (i32(9), 5, 10, 200, False)
    assert reconcile(live, tomb) == tomb and reconcile(tomb, live) == tomb
    assert reconcile(live, expiring) == expiring  # CASSANDRA-14592
    assert reconcile(expiring, tomb) == tomb
    assert reconcile((i32(2), 5, 0, None, False), live)[0] == i32(2)  # greater value


def test_counter_contexts_merge_by_shard_clock() -> None:
    def ctx(*shards: tuple[int, int, int]) -> bytes:
        head = struct.pack(f">h{len(shards)}h", len(shards), *(i - 32768 for i in
                                                                range(len(shards))))
        return head + b"".join(bytes([s[0]]) * 16 + struct.pack(">qq", s[1], s[2])
                               for s in shards)

    merged = merge_counter_contexts(ctx((1, 3, 10)), ctx((1, 2, 7), (2, 1, 5)))
    assert codec.counter_total(merged) == 15  # shard 1 clock 3 (10) + shard 2 (5)
    assert merge_counter_contexts(merged, merged) == merged


def test_partition_deletion_deletes_every_live_row_then_a_newer_insert_comes_back() -> None:
    proc = ChangeDetector(Merger(ORDER), has_static=False, gc_grace_s=100)
    state = PartitionState()
    rows = [(record("ROW", (i32(i),), liveness={"timestamp": 1, "ttl": 0,
                                                  "local_expiration_time": None},
                    cells=[cell("a", 1, i32(i))]), b"%d" % i) for i in range(3)]
    assert [c.op for c in proc.process(state, rows, NOW)] == ["c", "c", "c"]
    pd = record("PARTITION_DELETION", deletion={"marked_for_delete_at": 5,
                                                 "local_deletion_time": NOW})
    late = record("ROW", (i32(1),), cells=[cell("a", 3, i32(7))])  # older than the delete
    changes = proc.process(state, [(pd, b"pd"), (late, b"late")], NOW)
    # write-time order inside the batch: the older update first, then the deletion
    assert [c.op for c in changes] == ["u", "d", "d", "d"]
    assert changes[0].after == {"a": i32(7)}
    assert {c.clustering: c.before for c in changes[1:]}[(i32(1),)] == {"a": i32(7)}
    assert not state.rows  # shadowed data is not kept
    assert proc.process(state, [(late, b"late")], NOW) == []  # a late copy: no event
    newer = record("ROW", (i32(1),), cells=[cell("a", 9, i32(8))])
    (change,) = proc.process(state, [(newer, b"n")], NOW)
    assert change.op == "c" and change.after == {"a": i32(8)}


def test_ttl_expiry_is_reported_when_the_key_is_next_evaluated() -> None:
    proc = ChangeDetector(Merger(ORDER), has_static=False, gc_grace_s=100)
    state = PartitionState()
    rec = record("ROW", (i32(1),), cells=[cell("a", 1, i32(1)),
                                          cell("b", 1, b"", i32(4), 10, NOW + 10)])
    (created,) = proc.process(state, [(rec, b"r")], NOW)
    assert created.op == "c" and state.next_expiry == NOW + 10
    assert proc.expire(state, NOW + 5) == []
    (expired,) = proc.expire(state, NOW + 10)
    assert expired.op == "u" and expired.after == {"a": i32(1)} and expired.cause is None
    assert state.next_expiry is None


def test_update_without_insert_dies_with_its_last_cell() -> None:
    state = fold([record("ROW", (i32(1),), cells=[cell("a", 1, i32(1))]),
                  record("ROW", (i32(1),), cells=[cell("a", 2, None, tombstone=True,
                                                       ldt=NOW)])])
    assert partition_images(state, NOW) == {}
    state = fold([record("ROW", (i32(1),), liveness={"timestamp": 1, "ttl": 0,
                                                     "local_expiration_time": None},
                         cells=[cell("a", 1, i32(1))]),
                  record("ROW", (i32(1),), cells=[cell("a", 2, None, tombstone=True,
                                                       ldt=NOW)])])
    assert partition_images(state, NOW) == {(i32(1),): {}}  # INSERT keeps the row alive


def test_tombstones_are_purged_after_gc_grace_only() -> None:
    state = fold([record("PARTITION_DELETION", deletion={"marked_for_delete_at": 5,
                                                         "local_deletion_time": NOW})])
    purge(state, NOW + 50, gc_grace_s=100)
    assert state.deletion is not None
    purge(state, NOW + 101, gc_grace_s=100)
    assert state.is_empty()


def test_state_round_trips_and_refuses_foreign_bytes() -> None:
    state = fold([record("ROW", (i32(1),), cells=[cell("a", 1, i32(1)),
                                                  cell("b", 2, b"", i32(3))])])
    again = PartitionState.loads(state.dumps())
    assert again.canonical() == state.canonical()
    import pickle

    import pytest

    with pytest.raises(ValueError):
        PartitionState.loads(b"\x09" + state.dumps()[1:])
    with pytest.raises(pickle.UnpicklingError):
        PartitionState.loads(bytes([STATE_FORMAT]) + pickle.dumps(ValueError("x")))
    # format 1, written before row pages (never released), is refused
    body = (None, None, [], {(i32(1),): ((5, 0, None), None, {}, {})}, 0, None, 0)
    with pytest.raises(ValueError, match="unknown partition state format"):
        PartitionState.loads(b"\x01" + pickle.dumps(body))


def test_desc_clustering_and_prefix_bounds() -> None:
    desc = ClusteringOrder(table_from_json({
        "keyspace": "ks", "table": "d", "id": "5a1c0e2e-0000-4000-8000-000000000002",
        "columns": [{"name": "k", "kind": "partition_key", "position": 0, "type": "int"},
                    {"name": "c1", "kind": "clustering", "position": 0, "type": "int",
                     "clustering_order": "desc"},
                    {"name": "c2", "kind": "clustering", "position": 1, "type": "text",
                     "clustering_order": "asc"}]}, {}))
    # DESC: the range "c1 <= 5" runs from the start (largest) down to 5
    assert desc.in_range((i32(3), b"x"), (i32(5),), True, (), True)
    assert not desc.in_range((i32(7), b"x"), (i32(5),), True, (), True)
    assert desc.in_range((i32(5), b"b"), (i32(5), b"a"), False, (i32(5),), True)
    assert not desc.in_range((i32(5), b"a"), (i32(5), b"a"), False, (i32(5),), True)


def test_op_rule() -> None:
    assert op_of(None, {"a": b"1"}) == "c"
    assert op_of({"a": b"1"}, {"a": b"2"}) == "u"
    assert op_of({"a": b"1"}, {"a": b"1"}) is None
    assert op_of({"a": b"1"}, None) == "d"
    assert op_of(None, None) is None


def test_a_rewrite_a_reader_cannot_see_is_no_update() -> None:
    """Seen at RF=3: the same list written again has new element paths (timeuuids made at
    write time), an increment by 0 adds a counter shard; SELECT shows no change."""
    from materializer.rules.image import VisibleForm
    from shared.codec import counter_total

    visible = VisibleForm(frozenset({"l"}), frozenset({"n"}))
    first = {"l": ((b"\x01" * 16, b"a"), (b"\x02" * 16, b"b")), "v": b"1"}
    again = {"l": ((b"\x07" * 16, b"a"), (b"\x08" * 16, b"b")), "v": b"1"}
    other = {"l": ((b"\x07" * 16, b"b"), (b"\x08" * 16, b"a")), "v": b"1"}
    assert op_of(first, again) == "u"  # raw images differ...
    assert op_of(first, again, visible) is None  # ...but not what a reader sees
    assert op_of(first, other, visible) == "u"  # element order is visible
    assert op_of(first, {**again, "v": b"2"}, visible) == "u"
    # counter contexts of one shard (counter id, clock, count): a new clock, the same total
    one = bytes(2) + b"\x11" * 16 + (1).to_bytes(8, "big") + (5).to_bytes(8, "big")
    two = (bytes(2) + b"\x11" * 16 + (2).to_bytes(8, "big") + (5).to_bytes(8, "big"))
    assert counter_total(one) == counter_total(two) == 5
    assert op_of({"n": one}, {"n": two}, visible) is None
    assert op_of({"n": one}, {"n": two[:-1] + b"\x06"}, visible) == "u"
