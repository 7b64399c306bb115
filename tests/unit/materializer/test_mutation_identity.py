"""Which records are one change, and which are copies: writes of one timestamp, a
mutation's place in a batch, and the same record content in two mutations (the copy key)."""

from __future__ import annotations

import random
from typing import Any

from support import rowupdate_reference
from support.mutations import HOSTS, NOW_MS, body, handler, key, mutation, row, run


def test_writes_with_one_timestamp_are_one_change_in_any_order() -> None:
    # Found on the ring: statements with the same USING TIMESTAMP and TTL set `v` to `b`
    # then `a`, executed a second apart (expiry times one second apart). Cassandra keeps
    # the cell that expires last, then the greater value (Cells.resolveRegular): applied
    # one write at a time in mutation-id order, `v` flipped a → b → a, states no replica
    # ever held. Writes of one timestamp are concurrent: one change, in any arrival order.
    expiry = NOW_MS // 1000 + 600

    def ttl_write(ts: int, v: str, ldt: int) -> dict[str, Any]:
        b = body("ROW", 1, ts=ts, v=v, insert=True)
        b["liveness"].update(ttl=600, local_expiration_time=ldt)
        for cell in b["cells"]:
            cell.update(ttl=600, local_deletion_time=ldt)
        return b

    want = [(key(1), "c", None, row(1, None, "a"))]  # `a` expires last: SELECT shows it
    for ts in range(1000, 1016):  # other timestamps, other ids: other orders of the ids
        writes = [r for i, (v, d) in enumerate([("b", 0), ("b", 1), ("a", 1), ("a", 2)])
                  for h in HOSTS for r in mutation(10 + i, ttl_write(ts, v, expiry + d),
                                                   host=h)]
        random.Random(ts).shuffle(writes)
        assert run(handler(), writes)[0] == want, ts
    # a later write time is a change of its own again
    h = handler()
    _, state = run(h, writes)
    later = run(h, mutation(90, body("ROW", 1, ts=2000, v="z")), state)[0]
    assert later == [(key(1), "u", row(1, None, "a"), row(1, None, "z"))]


def test_a_mutations_place_does_not_depend_on_which_of_its_records_a_batch_holds() -> None:
    # BEGIN BATCH INSERT ... (2, 1, 'a') USING TIMESTAMP 3000; INSERT ... (2, 2, 'x') USING
    # TIMESTAMP 1000; APPLY BATCH (one partition: one mutation), and a later INSERT of row 2
    # at 2000. The mutation's row-1 record came in the first micro-batch; in the second, a
    # replica's no-op copy of it is there (dedupe off) or not (dropped by the dedupe). Its
    # place among the batch's mutations is its newest write time from its id (3000), so
    # both give the same events: the copy dedupe cannot change an event (issue 14).
    batch = {h: mutation(10, body("ROW", 1, ts=3000, v="a", insert=True),
                         body("ROW", 2, ts=1000, v="x", insert=True), host=h)
             for h in HOSTS[:2]}
    later = mutation(20, body("ROW", 2, ts=2000, v="y", insert=True))
    first = [batch[HOSTS[0]][0]]
    seen = []
    for second in ([batch[HOSTS[1]][0], batch[HOSTS[0]][1], *later],
                   [batch[HOSTS[0]][1], *later]):
        h = handler()
        events, state = run(h, first)
        more, _ = run(h, second, state)
        seen.append(events + more)
    assert seen[0] == seen[1] == [(key(1), "c", None, row(1, None, "a")),
                                  (key(2), "c", None, row(2, None, "y"))]


def test_a_record_two_mutations_hold_alike_is_no_copy_of_the_other() -> None:
    # UPDATE t USING TIMESTAMP 1000 SET s = 'a' WHERE p = 2, run alone and again in a batch
    # with a row write at 2000 (one mutation): the same record content in two mutations
    h = handler()
    _, state = run(h, mutation(5, body("ROW", 1, ts=500, v="old", insert=True)))
    alone = mutation(10, body("STATIC_ROW", s="a"))
    batch = mutation(20, body("STATIC_ROW", s="a"), body("ROW", 1, ts=2000, v="x", insert=True))
    assert rowupdate_reference.digest_of(alone[0]) == rowupdate_reference.digest_of(batch[0])
    every, _ = run(h, alone + batch, state)
    assert [(e[1], e[2]["s"], e[2]["v"], e[3]["s"], e[3]["v"]) for e in every] == \
        [("u", None, "old", "a", "old"), ("u", "a", "old", "a", "x")]
    # a dedupe on the content digest alone could keep only the batch's record: one change
    # where Cassandra made two, so copies are told apart by digest and mutation id
    assert run(h, batch, state)[0] != every
    keys = [rowupdate_reference.copy_key_of(v) for v in alone + batch]
    assert len(set(keys)) == 3
    other = mutation(77, *[body("STATIC_ROW", s="a")], host=HOSTS[1])[0]
    assert rowupdate_reference.copy_key_of(other) == keys[0]  # another replica's copy of
    # the statement run alone
