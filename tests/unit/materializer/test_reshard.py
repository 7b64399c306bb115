"""Re-sharding partition stores (pure parts): where each store write goes for a new
partition count, and what a drain check counts as not processed."""

from __future__ import annotations

import struct
import uuid

import pytest

from materializer.reshard import reshard_entries, undrained
from materializer.store.layout import entry_key, page_key
from shared.partitioner import crc32_partition
from shared.topic_names import raw_key

NEWEST = b"mnewest-batch"


def _entry(key: bytes) -> bytes:
    return b"e" + entry_key(key)


def _page(key: bytes, page: int) -> bytes:
    return b"e" + page_key(page, key)


def _expiry(pk: bytes, at_ms: int) -> bytes:
    return b"x" + struct.pack(">q", at_ms) + pk


def test_each_write_goes_to_its_keys_new_partition_and_the_newest_batch_to_all() -> None:
    # raw keys (table id + partition key) of two tables
    keys = [raw_key(uuid.UUID(int=t), struct.pack(">i", i)) for t in (1, 2) for i in range(20)]
    old = {p: {NEWEST: struct.pack(">q", 7 + p)} for p in range(2)}
    for pk in keys:
        store = old[crc32_partition(pk, 2)]
        store[_entry(pk)] = b"state of " + pk
        store[_page(pk, 3)] = b"page of " + pk
        store[_expiry(pk, 1_000)] = b"timer"
    new = reshard_entries(old, 5, crc32_partition)
    assert sorted(new) == [0, 1, 2, 3, 4]
    for pk in keys:
        home = new[crc32_partition(pk, 5)]
        assert home[_entry(pk)] == b"state of " + pk and home[_page(pk, 3)] == b"page of " + pk
        assert home[_expiry(pk, 1_000)] == b"timer"
        assert all(_entry(pk) not in s for p, s in new.items() if s is not home)
    assert {s[NEWEST] for s in new.values()} == {struct.pack(">q", 8)}  # the newest of all
    assert sum(len(s) for s in new.values()) == 3 * len(keys) + 5


def test_records_past_the_committed_offsets_are_not_drained() -> None:
    ends = {"p.raw.ks.t": {0: 10, 1: 4}, "p.raw.ks.u": {0: 0}}
    assert undrained(ends, {"p.raw.ks.t": {0: 10, 1: 4}}) == {}
    assert undrained(ends, {"p.raw.ks.t": {0: 8, 1: 4}}) == {"p.raw.ks.t": 2}
    assert undrained({"p.raw.ks.v": {0: 3}}, {}) == {"p.raw.ks.v": 3}


def test_a_record_left_in_a_partition_its_key_left_is_a_stray() -> None:
    """Raw partitions added by hand: a record not yet processed is fine where its key's
    records go now, a stray where they went before."""
    from materializer.reshard import strays

    keys = [raw_key(uuid.UUID(int=1), struct.pack(">i", i)) for i in range(40)]
    home = [(crc32_partition(k, 4), 10 + i, k) for i, k in enumerate(keys)]
    assert strays(home, 4, crc32_partition) == []
    moved = [k for k in keys if crc32_partition(k, 2) != crc32_partition(k, 4)]
    assert moved  # some keys change partition from 2 to 4
    old_place = [(crc32_partition(k, 2), 100 + i, k) for i, k in enumerate(moved)]
    assert strays(home + old_place, 4, crc32_partition) == [
        (p, o) for p, o, _k in old_place]


def test_a_store_with_a_table_sweep_under_way_is_refused_and_a_finished_one_left_behind(
        ) -> None:
    from materializer.reshard import ReshardRefused
    from materializer.store.layout import SWEEP, SWEPT
    from materializer.store.partition_store import _pack

    table = uuid.UUID(int=1).bytes
    pk = raw_key(uuid.UUID(int=1), struct.pack(">i", 3))
    finished = {b"e" + SWEEP + b"t" + table: _pack(9, None, b"cursor"),
                b"e" + SWEPT + b"r" + pk: _pack(9, None, b""), _entry(pk): b"state"}
    new = reshard_entries({0: finished}, 2, crc32_partition)
    assert [k for s in new.values() for k in s] == [_entry(pk)]
    under_way = {b"e" + SWEEP + b"t" + table: _pack(9, b"cursor", None)}
    with pytest.raises(ReshardRefused, match="partition 0's store has a table sweep under way"):
        reshard_entries({0: under_way}, 2, crc32_partition)

