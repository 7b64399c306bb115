"""One Cassandra mutation is one change: the records split from it are compared once.

The publisher splits a mutation into single-row records (a static row, rows, deletions)
that share source host, segment and position. A reader never sees a mutation half applied,
so neither may the events: no static-only row that lives between a mutation's static record
and its row record, no `d` + `c` for a row a batch deletes and rewrites.
"""

from __future__ import annotations

import copy
import random
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from materializer.rules.events import ChangeDetector, op_of
from materializer.rules.image import partition_images
from materializer.rules.merge import Merger
from materializer.rules.model import PartitionState
from shared import rowupdate

from support import rowupdate_reference
from support.mutations import (
    HOSTS,
    body,
    handler,
    key,
    mutation,
    row,
    run,
)
from support.paged import Paged
from support.records import NOW, ORDER, PUBLISHED, published, record_st

# INSERT INTO t (p, c, s, v) VALUES (2, 1, 'st', 'val'): a static row and a row, one mutation
INSERT = (body("STATIC_ROW", s="st"), body("ROW", 1, v="val", insert=True))


def test_an_insert_of_a_static_and_a_regular_column_is_one_create() -> None:
    for values in (mutation(10, *INSERT), mutation(10, *INSERT)[::-1]):
        events, _ = run(handler(), values)
        # no `c` + `d` of a static-only row {p: 2, c: null}: no reader ever saw one
        assert events == [(key(1), "c", None, row(1, "st", "val"))]


def test_a_batch_of_two_rows_and_a_static_column_gives_two_creates() -> None:
    # BEGIN BATCH UPDATE t SET s = 'st' WHERE p = 2; INSERT ... c = 1; INSERT ... c = 2;
    # APPLY BATCH: one partition, so Cassandra makes it one mutation
    batch = mutation(10, body("STATIC_ROW", s="st"), body("ROW", 1, v="a", insert=True),
                     body("ROW", 2, v="b", insert=True))
    events, _ = run(handler(), batch)
    assert events == [(key(1), "c", None, row(1, "st", "a")),
                      (key(2), "c", None, row(2, "st", "b"))]


def test_replica_copies_give_the_events_once_in_one_batch_and_across_batches() -> None:
    first = [mutation(10, *INSERT, host=h) for h in HOSTS]
    second = [mutation(20 + i, body("STATIC_ROW", ts=2000, s="st2"),
                       body("ROW", 2, ts=2000, v="b", insert=True), host=h)
              for i, h in enumerate(HOSTS)]  # each replica has its own segment positions
    once, _ = run(handler(), first[0] + second[0])
    assert [(e[0]["c"], e[1]) for e in once] == [(1, "c"), (1, "u"), (2, "c")]
    assert once[1][3] == row(1, "st2", "val")

    copies = [r for m in first + second for r in m]
    random.Random(4).shuffle(copies)
    assert run(handler(), copies)[0] == once

    h, state, seen = handler(), None, []
    for batch in ([*first[1], *second[2]], [*first[0], *first[2]], [*second[0], *second[1]]):
        events, state = run(h, batch, state)
        seen += events
    # across batches the later copies change nothing; the first copy of each mutation counts
    assert seen == once


def test_a_mutations_records_from_different_replicas_are_still_one_change() -> None:
    # what the copy dedupe can leave: the static row's first copy from one replica, the
    # row's from another (their own segment positions); the mutation id joins them
    mixed = [mutation(10, *INSERT, host=HOSTS[0])[0], mutation(37, *INSERT, host=HOSTS[2])[1]]
    assert rowupdate.mutation_of_value(mixed[0]) == rowupdate.mutation_of_value(mixed[1])
    events, _ = run(handler(), mixed)
    assert events == [(key(1), "c", None, row(1, "st", "val"))]


def test_a_static_only_partition_shows_its_row_until_a_later_mutation_writes_a_row() -> None:
    static_alone = mutation(10, body("STATIC_ROW", s="st"))
    then_a_row = mutation(20, body("ROW", 1, ts=2000, v="val", insert=True))
    expected = [(key(None), "c", None, row(None, "st")),
                (key(None), "d", row(None, "st"), None),
                (key(1), "c", None, row(1, "st", "val"))]
    h = handler()
    events, state = run(h, static_alone)
    more, _ = run(h, then_a_row, state)
    # between the two mutations SELECT showed {p: 2, c: null, s: 'st'}: a real row
    assert events + more == expected
    assert run(handler(), then_a_row + static_alone)[0] == expected  # one batch: the same


def test_a_partition_deletion_and_a_later_rewrite_in_one_batch_is_one_update() -> None:
    h = handler()
    _, state = run(h, mutation(10, body("STATIC_ROW", s="st"),
                               body("ROW", 1, v="a", insert=True),
                               body("ROW", 2, v="b", insert=True)))
    # BEGIN BATCH DELETE FROM t USING TIMESTAMP 2000 WHERE p = 2;
    # INSERT INTO t (p, c, v) VALUES (2, 1, 'new') USING TIMESTAMP 2001; APPLY BATCH
    events, _ = run(h, mutation(20, body("PARTITION_DELETION", deleted_at=2000),
                                body("ROW", 1, ts=2001, v="new", insert=True)), state)
    assert events == [(key(1), "u", row(1, "st", "a"), row(1, None, "new")),
                      (key(2), "d", row(2, "st", "b"), None)]


def test_a_row_deleted_and_another_inserted_in_one_batch_shows_no_static_only_row() -> None:
    h = handler()
    _, state = run(h, mutation(10, *INSERT))
    # BEGIN BATCH DELETE FROM t WHERE p = 2 AND c = 1; INSERT ... (2, 3, 'x'); APPLY BATCH
    events, _ = run(h, mutation(20, body("ROW", 1, ts=2000, deleted_at=2000),
                                body("ROW", 3, ts=2000, v="x", insert=True)), state)
    assert events == [(key(1), "d", row(1, "st", "val"), None),
                      (key(3), "c", None, row(3, "st", "x"))]


def test_the_cause_is_the_rows_own_record() -> None:
    proc = ChangeDetector(Merger(ORDER), has_static=True, gc_grace_s=10**6)
    static, new_row = (rowupdate_reference.decode(r) for r in mutation(10, *INSERT))
    # (the row's clustering is in support.records' table: an int, as here)
    (change,) = proc.process(PartitionState(), [(static, b"a"), (new_row, b"b")], NOW)
    assert change.cause is new_row and change.ts_us == 1000
    lone = rowupdate_reference.decode(mutation(30, body("STATIC_ROW", ts=3000, s="x"))[0])
    (change,) = proc.process(PartitionState(), [(lone, b"a")], NOW)
    assert change.clustering == () and change.cause is lone and change.ts_us == 3000
    # a deletion and a rewrite: the rewritten row's cause is its own record, the deleted
    # row's the deletion (each with its own write time)
    state = PartitionState()
    proc.process(state, [(rowupdate_reference.decode(r), r) for r in mutation(
        10, body("ROW", 1, v="a", insert=True), body("ROW", 2, v="b", insert=True))], NOW)
    pd, rewrite = (rowupdate_reference.decode(r) for r in mutation(
        20, body("PARTITION_DELETION", deleted_at=2000),
        body("ROW", 1, ts=2001, v="new", insert=True)))
    updated, deleted = proc.process(state, [(rewrite, b"a"), (pd, b"b")], NOW)
    assert (updated.op, updated.cause, updated.ts_us) == ("u", rewrite, 2001)
    assert (deleted.op, deleted.cause, deleted.ts_us) == ("d", pd, 2000)


# ---- properties: random mutations, delivered by up to three replicas, in any batches -----
@st.composite
def mutations_st(draw: Any) -> list[list[dict[str, Any]]]:
    """Mutations of one partition: each a few records of support.records' strategy."""
    return draw(st.lists(st.lists(record_st(), min_size=1, max_size=4), max_size=6))


def deliver(mutations: list[list[dict[str, Any]]], hosts: int) -> list[list[dict[str, Any]]]:
    """Every replica's copy of every mutation (its records, with their source); positions
    differ per host."""
    out = []
    for h in range(hosts):
        for m, records in enumerate(mutations):
            out.append([copy.deepcopy(rec) | {"source": {
                "host": f"h{h}", "datacenter": "dc1", "file": "f", "segment_id": 1,
                "position": 100 * m + 7 * h, "index": i, "commitlog_version": 7,
                "messaging_version": 12}} for i, rec in enumerate(records)])
    return out


def flat(copies: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    return [r for records in copies for r in records]


def changes(proc: ChangeDetector, state: PartitionState, records: list[dict[str, Any]],
            now: int = NOW) -> list:
    return proc.process(state, published(records), now)


@settings(max_examples=120, deadline=None)
@given(mutations_st(), st.integers(1, 3), st.integers(1, 4), st.randoms(use_true_random=False))
def test_one_mutation_changes_a_row_at_most_once_and_replay_rebuilds_the_rows(
        mutations: list, hosts: int, batches: int, rnd: random.Random) -> None:
    proc = ChangeDetector(Merger(ORDER), has_static=True, gc_grace_s=10**6)
    copies = deliver(mutations, hosts)
    rnd.shuffle(copies)
    state, seen, per_mutation = PartitionState(), {}, set()
    size = max(1, len(copies) // batches)
    for i in range(0, len(copies), size):
        # whole mutations per batch (one straddling two batches is a known limitation)
        batch = flat(copies[i:i + size])
        rnd.shuffle(batch)
        for ch in changes(proc, state, batch):
            assert op_of(ch.before, ch.after) == ch.op
            assert seen.get(ch.clustering) == ch.before  # each before is the last after
            seen.pop(ch.clustering, None)
            if ch.after is not None:
                seen[ch.clustering] = ch.after
            src = ch.cause["source"]
            one = (src["host"], src["position"], ch.clustering)
            assert one not in per_mutation, "a mutation changed one row twice"
            per_mutation.add(one)
    assert seen == partition_images(state, NOW)


@settings(max_examples=120, deadline=None)
@given(mutations_st(), st.randoms(use_true_random=False))
def test_replica_copies_in_one_batch_give_the_events_of_one_copy(mutations: list,
                                                                 rnd: random.Random) -> None:
    def events(records: list) -> list:
        proc = ChangeDetector(Merger(ORDER), has_static=True, gc_grace_s=10**6)
        return [(c.op, c.clustering, c.before, c.after, c.ts_us)
                for c in changes(proc, PartitionState(), records)]

    copies = flat(deliver(mutations, 3))
    rnd.shuffle(copies)
    assert events(copies) == events(flat(deliver(mutations, 1)))


@settings(max_examples=100, deadline=None)
@given(st.lists(mutations_st(), min_size=1, max_size=5))
def test_pages_give_the_same_events_for_grouped_mutations(batches: list) -> None:
    whole, paged = Paged(page_rows=10**6), Paged(page_rows=1)
    for i, mutations in enumerate(batches):
        now = NOW - 4 + 2 * i
        batch = flat(deliver(mutations, 2))
        assert paged.run(copy.deepcopy(batch), now) == whole.run(copy.deepcopy(batch), now)
        assert paged.visible(now) == whole.visible(now)


def as_published(copies: list[list[dict[str, Any]]]) -> list[list[tuple[dict, bytes]]]:
    """Each copy's records with the raw values its publisher writes (the records of one
    mutation share a mutation id)."""
    out = []
    for records in copies:
        full = [rec | PUBLISHED for rec in records]
        out.append(list(zip(full, rowupdate_reference.encode_update(full), strict=True)))
    return out


@settings(max_examples=150, deadline=None)
@given(mutations_st(), st.randoms(use_true_random=False))
def test_each_record_kept_from_any_replica_gives_the_events_of_one_copy(
        mutations: list, rnd: random.Random) -> None:
    """What the copy dedupe leaves of three replicas' copies: one copy of each record, the
    first to arrive, so a mutation's records may each come from another replica. The events
    are those of one replica's copy, in any order within the batch."""
    def events(items: list) -> list:
        proc = ChangeDetector(Merger(ORDER), has_static=True, gc_grace_s=10**6)
        return [(c.op, c.clustering, c.before, c.after, c.ts_us)
                for c in proc.process(PartitionState(), items, NOW)]

    n = len(mutations)
    copies = as_published(deliver(mutations, 3))  # replica h's copy of m at h * n + m
    kept = [copies[rnd.randrange(3) * n + m][i]
            for m in range(n) for i in range(len(mutations[m]))]
    rnd.shuffle(kept)
    assert events(kept) == events([item for c in copies[:n] for item in c])
