"""A TRUNCATE's, a reset's and a truncate barrier's sweeps of a table spread over micro-batches
(`materializer.task.table_sweep`), through the task's merge with real RocksDB stores and a
small `sweep_keys`: each batch does at most that many keys, every key gets its events once,
a key the merge changes during a sweep gets its sweep's events first (or none owed), a
replayed batch gives the same events, and the truncate barrier hears of a TRUNCATE only
once its sweep is through the table."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from materializer.store.layout import PAGE
from materializer.store.partition_store import PartitionStore
from materializer.store.table_sweeps import TRUNCATE, Sweep
from shared.heartbeat import Heartbeat, encode_heartbeat
from shared.table_truncate import TableTruncate, encode_table_truncate
from shared.topic_names import raw_key
from shared.truncate_barrier import TruncateBarrier, encode_truncate_barrier

from support.events import NOW_MS, TABLE, Registry, i32, row_of
from support.task_run import run_task

T0 = NOW_MS // 1000 - 3600  # the writes before the truncation, in s
TRUNCATED_MS = (T0 + 10) * 1000
KEYS = 10
BUDGET = 3  # keys a task's sweeps go through per batch here
BEAT = (b"", encode_heartbeat(Heartbeat("node-1", NOW_MS, {})))  # a batch with no change


def _truncate(reset: bool = False) -> tuple[bytes, bytes]:
    return TABLE.id.bytes, encode_table_truncate(TableTruncate(
        TABLE.id, "shop", "orders", "snapshot" if reset else "node-1", TRUNCATED_MS, "dc1",
        reset=reset, schema_hash=TABLE.schema_hash if reset else ""))


def _barrier() -> tuple[bytes, bytes]:
    return TABLE.id.bytes, encode_truncate_barrier(
        TruncateBarrier(TABLE.id, "shop", "orders", TRUNCATED_MS * 1000))


def _orders(k: int, qty: int, ts_s: int) -> tuple[bytes, bytes]:
    return raw_key(TABLE.id, i32(k)), row_of(TABLE, k, qty, ts_s)


def _run(root: Path, batch: int, rows: list[tuple[bytes, bytes]], sweep_keys: int = BUDGET,
         now_ms: int = NOW_MS, files: list[str] | None = None
         ) -> tuple[list[tuple[int, str]], list[dict[str, Any]]]:
    """One task of micro-batch `batch`: its events (key id, op) in order (their source
    files into `files`), and its reports to the truncate barrier."""
    out = run_task(root, batch, now_ms, rows, Registry(TABLE), offset_step=1000,
                   sweep_keys=sweep_keys)
    events, applied = [], []
    for r in out[:-1]:
        if r["topic"] == "p.truncations":
            applied.append(json.loads(r["value"]))
        elif r["value"] is not None:
            value = json.loads(r["value"])
            events.append((json.loads(r["key"])["id"], value["op"]))
            if files is not None:
                files.append(value["source"]["file"])
    return events, applied


def _filled(root: Path) -> None:
    _run(root, 0, [_orders(k, k, T0) for k in range(KEYS)])


def test_a_truncate_of_more_keys_than_the_budget_spans_batches_each_key_once(
        tmp_path) -> None:
    _filled(tmp_path)
    seen, reports = [], []
    for batch, rows in enumerate([[_truncate()], [BEAT], [BEAT], [BEAT], [BEAT]], start=1):
        events, applied = _run(tmp_path, batch, rows)
        assert len(events) <= BUDGET, f"batch {batch} went past its budget: {events}"
        seen += events
        reports.append(len(applied))
    assert sorted(seen) == [(k, "d") for k in range(KEYS)]
    # the barrier hears of the truncation once every key is done, and once
    assert reports == [0, 0, 0, 1, 0]
    # the default: a table of this size in one batch, reported at once
    _filled(tmp_path / "whole")
    events, applied = _run(tmp_path / "whole", 1, [_truncate()], sweep_keys=0)
    assert sorted(events) == [(k, "d") for k in range(KEYS)] and len(applied) == 1


def test_a_key_written_while_a_truncate_sweep_is_under_way_loses_its_old_row_first(
        tmp_path) -> None:
    _filled(tmp_path)
    events, _ = _run(tmp_path, 1, [_truncate()])
    assert events == [(0, "d"), (1, "d"), (2, "d")]
    # keys 8 and 9, not reached yet: key 8 written after the truncation loses its old row
    # first; key 9 gets a late copy of its write before the truncation, which merges under
    # the floor (no event), and loses its row too
    events, _ = _run(tmp_path, 2, [_orders(8, 80, T0 + 20), _orders(9, 9, T0 + 1)])
    assert events == [(3, "d"), (4, "d"), (5, "d"), (8, "d"), (8, "c"), (9, "d")]
    events, _ = _run(tmp_path, 3, [BEAT])
    assert events == [(6, "d"), (7, "d")]  # and key 8 again: a removal done twice is nothing
    events, applied = _run(tmp_path, 4, [BEAT])
    assert events == [] and len(applied) == 1  # key 9 again, then through


def test_a_batch_run_again_mid_sweep_gives_the_same_events_and_goes_on(tmp_path) -> None:
    _filled(tmp_path)
    _run(tmp_path, 1, [_truncate()])
    first, _ = _run(tmp_path, 2, [_orders(8, 80, T0 + 20)])
    again, _ = _run(tmp_path, 2, [_orders(8, 80, T0 + 20)])  # not committed: it runs again
    assert again == first == [(3, "d"), (4, "d"), (5, "d"), (8, "d"), (8, "c")]
    events, _ = _run(tmp_path, 3, [BEAT])
    assert events == [(6, "d"), (7, "d")]  # and key 8 again, removing nothing now
    events, applied = _run(tmp_path, 4, [BEAT])
    assert events == [(9, "d")] and len(applied) == 1


def test_a_reset_sweep_leaves_a_row_written_during_it(tmp_path) -> None:
    _filled(tmp_path)
    events, _ = _run(tmp_path, 1, [_truncate(reset=True)])
    assert events == [(0, "d"), (1, "d"), (2, "d")]
    # the snapshot's row of key 8 (its old write time: a reset raises no floor) comes before
    # the sweep gets there: the old row goes, the snapshot's stays
    snapshot_row = row_of(TABLE, 8, 88, T0, kind="SNAPSHOT_ROW")
    events, _ = _run(tmp_path, 2, [(raw_key(TABLE.id, i32(8)), snapshot_row)])
    assert events == [(3, "d"), (4, "d"), (5, "d"), (8, "d"), (8, "r")]
    events, applied = _run(tmp_path, 3, [BEAT])
    assert events == [(6, "d"), (7, "d"), (9, "d")]  # not 8 again
    assert [(a["reset"], a["schema_hash"]) for a in applied] == [(True, TABLE.schema_hash)]
    events, _ = _run(tmp_path, 4, [_orders(8, 89, T0 + 30)])
    assert events == [(8, "u")]  # its row is there


def test_a_barrier_sweep_leaves_out_a_key_changed_while_it_is_under_way(tmp_path) -> None:
    _run(tmp_path, 0, [_truncate()] + [_orders(k, k, T0 + 20) for k in range(KEYS)],
         sweep_keys=0)
    events, _ = _run(tmp_path, 1, [_barrier()])
    assert events == [(0, "r"), (1, "r"), (2, "r")]
    events, _ = _run(tmp_path, 2, [_orders(8, 80, T0 + 30)])
    assert events == [(8, "u"), (3, "r"), (4, "r"), (5, "r")]
    events, _ = _run(tmp_path, 3, [BEAT])
    assert events == [(6, "r"), (7, "r"), (9, "r")]  # 8's row came after the barrier
    events, _ = _run(tmp_path, 4, [BEAT])
    assert events == []  # done


def test_a_key_that_expires_before_its_truncate_sweep_gets_there_loses_its_old_rows_too(
        tmp_path) -> None:
    # key 8: line 1 written before the truncation; line 2 after it, expiring at T0 + 22
    expiring = row_of(TABLE, 8, 2, T0 + 12, line=2, ttl_s=10)
    _run(tmp_path, 0, [_orders(k, k, T0) for k in range(8)]
         + [_orders(8, 1, T0), (raw_key(TABLE.id, i32(8)), expiring)],
         now_ms=(T0 + 15) * 1000)
    events, _ = _run(tmp_path, 1, [_truncate()], now_ms=(T0 + 15) * 1000)
    assert events == [(0, "d"), (1, "d"), (2, "d")]
    files: list[str | None] = []
    events, _ = _run(tmp_path, 2, [BEAT], now_ms=(T0 + 25) * 1000, files=files)
    # key 8's expiry is due before the sweep gets there: line 1, truncated before line 2
    # expired, goes with it, not batches later
    assert events[3:] == [(8, "d"), (8, "d")]
    assert sorted(files[3:], key=str) == [None, "truncate"]


def _line(pk: int, line: int, ts_s: int) -> tuple[bytes, bytes]:
    return raw_key(TABLE.id, i32(pk)), row_of(TABLE, pk, line, ts_s, line=line)


def test_a_reset_removes_a_wide_partitions_pages_with_its_key(tmp_path) -> None:
    wide = 600  # rows of key 7: in pages of 256 at most
    _run(tmp_path, 0, [_line(7, c, T0) for c in range(wide)] + [_orders(8, 8, T0)])
    events, _ = _run(tmp_path, 1, [_truncate(reset=True)], sweep_keys=1)
    assert sorted(events) == [(7, "d")] * wide
    events, _ = _run(tmp_path, 2, [BEAT], sweep_keys=1)
    assert events == [(8, "d")]
    store = PartitionStore(tmp_path / "p.raw" / "0", 3, 60_000, NOW_MS)
    try:
        assert [k for k in store.entry_keys(PAGE + TABLE.id.bytes)
                if store.get(k) is not None] == []
    finally:
        store.close()


def test_a_sweep_of_a_dropped_table_ends(tmp_path) -> None:
    from shared.table_drop import TableDrop, encode_table_drop

    _filled(tmp_path)
    _run(tmp_path, 1, [_truncate()])
    drop = encode_table_drop(TableDrop(TABLE.id, "shop", "orders", "node-1", NOW_MS))
    _run(tmp_path, 2, [(TABLE.id.bytes, drop)])
    events, applied = _run(tmp_path, 3, [BEAT])
    assert events == [] and applied == []


@pytest.mark.parametrize("cursor", [b"", bytes(range(20))])
def test_a_sweep_entry_round_trips(cursor: bytes) -> None:
    sweep = Sweep(TRUNCATE, TABLE.id.bytes, 42, _truncate()[1], TABLE.schema_hash, cursor)
    assert Sweep.unpack(TRUNCATE, TABLE.id.bytes, sweep.pack()) == sweep
