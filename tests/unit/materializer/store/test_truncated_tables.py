"""A truncated table's state in a partition store (materializer.store.truncated_tables),
through the task's merge with real RocksDB stores: every row written before the truncation
gone (`d` events), later writes merged under the floor, a lagging publisher's older copies
left out, another replica's record of the same truncation a no-op, a replay alike."""

from __future__ import annotations

import json
import struct
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from shared.table_truncate import (
    TableTruncate,
    decode_table_truncate,
    encode_table_truncate,
    is_table_truncate,
    parse_truncation_record,
)
from shared.topic_names import raw_key
from shared.truncate_barrier import TruncateBarrier, encode_truncate_barrier

from support.events import NOW_MS, TABLE, Registry, deletion_of, i32, row_of
from support.task_run import run_task

OTHER = replace(TABLE, table="returns", id=uuid.UUID(int=43))
T0 = NOW_MS // 1000 - 3600  # the writes before the truncation, in s
TRUNCATED_MS = (T0 + 10) * 1000


def _truncate(at_ms: int = TRUNCATED_MS, host: str = "node-1") -> bytes:
    return encode_table_truncate(TableTruncate(TABLE.id, "shop", "orders", host, at_ms, "dc1",
                                               1795866525389, 4242))


def _run(root: Path, batch: int, rows: list[tuple[bytes, bytes]], now_ms: int = NOW_MS
         ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """One task of micro-batch `batch` on partition 0: its events (key id, op, after's qty,
    source file), and its stats, with its reports to the truncate barrier ("applied")."""
    out = run_task(root, batch, now_ms, rows, Registry(TABLE, OTHER))
    events, applied = [], []
    for r in out[:-1]:
        if r["topic"] == "p.truncations":
            applied.append(json.loads(r["value"]))
            continue
        if r["value"] is None:
            continue
        value = json.loads(r["value"])
        after = value["after"]
        events.append({"table": r["topic"], "id": json.loads(r["key"])["id"],
                       "op": value["op"], "qty": None if after is None else after["qty"],
                       "file": value["source"]["file"]})
    return events, json.loads(out[-1]["stats"] or "{}") | {"applied": applied}


def _orders(k: int, qty: int, ts_s: int) -> tuple[bytes, bytes]:
    return raw_key(TABLE.id, i32(k)), row_of(TABLE, k, qty, ts_s)


def test_a_table_truncate_round_trips_and_a_truncation_record_parses() -> None:
    value = _truncate()
    assert is_table_truncate(value) and not is_table_truncate(b"\x02{}")
    got = decode_table_truncate(value)
    assert got.name == "shop.orders" and got.floor_us == TRUNCATED_MS * 1000
    assert (got.host, got.datacenter, got.segment_id, got.position) == (
        "node-1", "dc1", 1795866525389, 4242)
    # system.local.truncated_at: position (segment id, offset), then the time in ms
    blob = struct.pack(">qiq", 1795866525389, 4242, TRUNCATED_MS)
    assert parse_truncation_record(blob) == (1795866525389, 4242, TRUNCATED_MS)
    with pytest.raises(ValueError, match="20 bytes, not 12"):
        parse_truncation_record(blob[:12])


def test_a_truncate_removes_what_was_written_before_it_and_nothing_after(tmp_path) -> None:
    rows = [_orders(k, k, T0) for k in range(5)]
    rows.append((raw_key(OTHER.id, i32(0)), row_of(OTHER, 0, 7, T0)))
    events, _ = _run(tmp_path, 0, rows)
    assert len(events) == 6
    # batch 1: a write after the truncation (its publisher ahead of the announcement), the
    # truncation, a lagging copy of a write before it (a key never seen), another replica's
    # record of the same truncation (its clock a little behind)
    batch1 = [_orders(0, 50, T0 + 20), (TABLE.id.bytes, _truncate()),
              _orders(5, 5, T0 + 1), (TABLE.id.bytes, _truncate(TRUNCATED_MS - 5, "node-2")),
              (raw_key(OTHER.id, i32(0)), row_of(OTHER, 0, 8, T0 + 20))]
    events, stats = _run(tmp_path, 1, batch1)
    gone = [e for e in events if e["file"] == "truncate"]
    assert sorted(e["id"] for e in gone) == [0, 1, 2, 3, 4]
    assert {e["op"] for e in gone} == {"d"}
    rest = [(e["table"], e["id"], e["op"], e["qty"]) for e in events if e["file"] != "truncate"]
    # key 0 after its removal: a new row, holding only what was written after the truncation
    assert rest == [("p.shop.orders", 0, "c", 50), ("p.shop.returns", 0, "u", 8)]
    assert events.index(gone[0]) < len(gone)  # the removals come first
    assert stats["truncated"] == {"shop.orders": 5} and stats["covered"] == 1
    # the partition reports the floor it applied to the truncate barrier, with a version of
    # the table to render its truncate event with
    assert [(a["table"], a["floor_us"], a["topic"], a["partition"], a["schema_hash"])
            for a in stats["applied"]] == [("orders", TRUNCATED_MS * 1000, "p.raw", 0,
                                            TABLE.schema_hash)]
    # batch 1 again (not committed): the same, the floor rolled back with the store
    again, stats = _run(tmp_path, 1, batch1)
    assert again == events and stats["truncated"] == {"shop.orders": 5}
    # batch 2: late copies from before the truncation change nothing; a record of the same
    # truncation announced again removes nothing; a new write merges on top of key 0
    batch2 = [_orders(1, 11, T0 + 2), (TABLE.id.bytes, _truncate()), _orders(0, 60, T0 + 30),
              _orders(6, 6, T0 + 30)]
    events, stats = _run(tmp_path, 2, batch2)
    assert [(e["id"], e["op"], e["qty"]) for e in events] == [(0, "u", 60), (6, "c", 6)]
    assert stats["covered"] == 1 and "shop.orders" not in stats.get("truncated", {})
    assert stats["applied"] == []  # nothing raised: nothing to report


def test_a_later_truncation_removes_what_came_between(tmp_path) -> None:
    _run(tmp_path, 0, [_orders(0, 1, T0), (TABLE.id.bytes, _truncate())])
    events, _ = _run(tmp_path, 1, [_orders(1, 2, T0 + 20)])
    assert [(e["id"], e["op"]) for e in events] == [(1, "c")]
    events, stats = _run(tmp_path, 2, [(TABLE.id.bytes, _truncate((T0 + 25) * 1000)),
                                       _orders(2, 3, T0 + 30)])
    assert [(e["id"], e["op"], e["file"]) for e in events] == [
        (1, "d", "truncate"), (2, "c", "CommitLog-7-5.log")]
    assert stats["truncated"] == {"shop.orders": 1}


def _line(pk: int, line: int, ts_s: int) -> tuple[bytes, bytes]:
    """An INSERT of row (pk, line) of orders at `ts_s` (its qty: the line)."""
    return raw_key(TABLE.id, i32(pk)), row_of(TABLE, pk, line, ts_s, line=line)


def test_a_truncate_removes_every_row_of_a_wide_partition_in_its_pages(tmp_path) -> None:
    wide = 700  # rows of one partition: its state is in pages (256 rows each at most)
    out = run_task(tmp_path, 0, NOW_MS, [_line(7, c, T0) for c in range(wide)],
                   Registry(TABLE), offset_step=10_000)
    assert len(out) - 1 == wide
    out = run_task(tmp_path, 1, NOW_MS, [(TABLE.id.bytes, _truncate()), _line(7, 3, T0 + 20)],
                   Registry(TABLE), offset_step=10_000)
    ops = [(json.loads(r["key"])["line"], json.loads(r["value"])["op"]) for r in out[:-1]
           if r["value"] is not None and r["topic"] != "p.truncations"]
    assert sorted(ops[:wide]) == [(c, "d") for c in range(wide)]
    assert ops[wide:] == [(3, "c")]


def _barrier(floor_us: int = TRUNCATED_MS * 1000) -> bytes:
    return encode_truncate_barrier(TruncateBarrier(TABLE.id, "shop", "orders", floor_us))


def test_a_truncate_barrier_writes_the_live_rows_again_after_the_truncate_events(
        tmp_path) -> None:
    _run(tmp_path, 0, [_orders(k, k, T0) for k in range(3)]
         + [(raw_key(OTHER.id, i32(0)), row_of(OTHER, 0, 7, T0))])
    # rows 1 and 5 written after the truncation, before the truncate events were: a
    # consumer's truncate removes them, so they come again after the barrier
    _run(tmp_path, 1, [(TABLE.id.bytes, _truncate()), _orders(1, 10, T0 + 20),
                       _orders(5, 50, T0 + 20)])
    events, _ = _run(tmp_path, 2, [_orders(5, 51, T0 + 30), (TABLE.id.bytes, _barrier())])
    # key 5, merged in the same batch, has its event after the barrier already: no repeat
    assert [(e["table"], e["id"], e["op"], e["qty"], e["file"]) for e in events] == [
        ("p.shop.orders", 5, "u", 51, "CommitLog-7-5.log"),
        ("p.shop.orders", 1, "r", 10, "truncate")]
    # a barrier that comes again (a replayed raw topic) writes them again, which is harmless
    events, _ = _run(tmp_path, 3, [(TABLE.id.bytes, _barrier())])
    assert sorted((e["id"], e["op"], e["qty"]) for e in events) == [(1, "r", 10),
                                                                     (5, "r", 51)]


def test_a_truncate_barrier_writes_every_row_of_a_wide_partition_again(tmp_path) -> None:
    wide = 600
    run_task(tmp_path, 0, NOW_MS, [(TABLE.id.bytes, _truncate())]
             + [_line(7, c, T0 + 20) for c in range(wide)], Registry(TABLE),
             offset_step=10_000)
    out = run_task(tmp_path, 1, NOW_MS, [(TABLE.id.bytes, _barrier())], Registry(TABLE),
                   offset_step=10_000)
    rows = [(json.loads(r["key"])["line"], json.loads(r["value"])["op"]) for r in out[:-1]]
    assert rows == [(c, "r") for c in range(wide)]  # in clustering order, from its pages


def test_a_key_merged_with_the_barrier_without_an_event_is_written_again(tmp_path) -> None:
    _run(tmp_path, 0, [(TABLE.id.bytes, _truncate()), _orders(1, 10, T0 + 20)])
    # the barrier's batch holds a late copy of a write before the truncation of key 1: it
    # is left out (no event), so key 1's row must still come again after the barrier
    events, stats = _run(tmp_path, 1, [_orders(1, 3, T0 + 1), (TABLE.id.bytes, _barrier())])
    assert [(e["id"], e["op"], e["qty"]) for e in events] == [(1, "r", 10)]
    assert stats["covered"] == 1


def _reset(at_ms: int) -> bytes:
    """What `casscade snapshot --reset` writes to each raw partition."""
    return encode_table_truncate(TableTruncate(TABLE.id, "shop", "orders", "snapshot", at_ms,
                                               reset=True, schema_hash=TABLE.schema_hash))


def test_a_reset_round_trips_and_a_truncation_record_stays_as_it_was() -> None:
    got = decode_table_truncate(_reset(TRUNCATED_MS))
    assert got.reset and got.floor_us == TRUNCATED_MS * 1000
    assert got.schema_hash == TABLE.schema_hash
    assert not decode_table_truncate(_truncate()).reset
    assert b"reset" not in _truncate()


def test_a_reset_empties_the_table_whatever_the_write_times_and_raises_no_floor(
        tmp_path) -> None:
    # key 0 written after the reset's time (a client clock ahead): a reset removes it too
    _run(tmp_path, 0, [_orders(0, 1, T0 + 100), _orders(1, 2, T0),
                       (raw_key(OTHER.id, i32(0)), row_of(OTHER, 0, 7, T0))])
    events, stats = _run(tmp_path, 1, [(TABLE.id.bytes, _reset(TRUNCATED_MS)),
                                       _orders(1, 3, T0 + 1)])
    gone = sorted((e["id"], e["op"]) for e in events if e["file"] == "truncate")
    assert gone == [(0, "d"), (1, "d")]
    # a live copy older than the reset is left out: the snapshot says what the table holds
    assert [e for e in events if e["file"] != "truncate"] == []
    assert stats["covered"] == 1 and stats["truncated"] == {"shop.orders": 2}
    assert [a["floor_us"] for a in stats["applied"]] == [TRUNCATED_MS * 1000]
    # the snapshot's rows, with their original write times: new rows of the table (no
    # state left to shadow them, no floor under them), the other table untouched
    events, stats = _run(tmp_path, 2, [
        (raw_key(TABLE.id, i32(0)), row_of(TABLE, 0, 1, T0 + 100, kind="SNAPSHOT_ROW")),
        (raw_key(TABLE.id, i32(1)), row_of(TABLE, 1, 2, T0, kind="SNAPSHOT_ROW")),
        (raw_key(OTHER.id, i32(0)), row_of(OTHER, 0, 7, T0))])
    assert [(e["table"], e["id"], e["op"], e["qty"]) for e in events] == [
        ("p.shop.orders", 0, "r", 1), ("p.shop.orders", 1, "r", 2)]
    # a live write after the reset merges on top
    events, _ = _run(tmp_path, 3, [_orders(1, 4, T0 + 20)])
    assert [(e["id"], e["op"], e["qty"]) for e in events] == [(1, "u", 4)]
    # the same reset again (the record read twice): it removes what is there again
    events, _ = _run(tmp_path, 4, [(TABLE.id.bytes, _reset(TRUNCATED_MS))])
    assert sorted((e["id"], e["op"]) for e in events) == [(0, "d"), (1, "d")]


def test_a_late_copy_of_a_write_deleted_before_a_reset_does_not_bring_its_row_back(
        tmp_path) -> None:
    """(issue 72) A row inserted, then deleted, then the table reset; a replica's copy of
    the INSERT arrives after the reset, later than the dedupe window: before, it merged into
    the reset's empty state as a new row the snapshot never removed."""
    _run(tmp_path, 0, [_orders(5, 50, T0)])
    events, _ = _run(tmp_path, 1, [(raw_key(TABLE.id, i32(5)), deletion_of(TABLE, 5, T0 + 5))])
    assert [(e["id"], e["op"]) for e in events] == [(5, "d")]
    events, _ = _run(tmp_path, 2, [(TABLE.id.bytes, _reset(TRUNCATED_MS))])
    assert events == []  # nothing held of key 5 but its tombstone, now gone
    # node 3's copy of the INSERT, later than the dedupe window (the task's: a minute)
    events, stats = _run(tmp_path, 3, [_orders(5, 50, T0)], NOW_MS + 120_000)
    assert events == [] and stats["covered"] == 1


def test_a_reset_after_a_truncate_lets_its_snapshot_bring_back_what_the_truncate_met_wrongly(
        tmp_path) -> None:
    """(issue 72) A write concurrent with a TRUNCATE, stamped before the truncation time,
    that Cassandra kept: the stream removed it. A reset's snapshot reads it from the table:
    before, its row was left out under the TRUNCATE's floor."""
    _run(tmp_path, 0, [_orders(7, 70, T0 + 5), (TABLE.id.bytes, _truncate())])
    events, _ = _run(tmp_path, 1, [(TABLE.id.bytes, _reset(TRUNCATED_MS + 20_000))])
    assert events == []
    kept = raw_key(TABLE.id, i32(7)), row_of(TABLE, 7, 70, T0 + 5, kind="SNAPSHOT_ROW")
    events, stats = _run(tmp_path, 2, [kept])
    assert [(e["id"], e["op"], e["qty"]) for e in events] == [(7, "r", 70)]
    assert stats.get("covered", 0) == 0
    # a TRUNCATE after the reset: its floor holds again, for the snapshot's rows too
    _run(tmp_path, 3, [(TABLE.id.bytes, _truncate(TRUNCATED_MS + 60_000))])
    late = raw_key(TABLE.id, i32(8)), row_of(TABLE, 8, 80, T0 + 30, kind="SNAPSHOT_ROW")
    events, stats = _run(tmp_path, 4, [late])
    assert events == [] and stats["covered"] == 1


def test_a_reset_where_the_job_holds_no_key_still_reports_a_version_to_render_with(
        tmp_path) -> None:
    # a new checkpoint (a lost one, a lost Kafka cluster): its consumers still hold rows, so
    # the reset's truncate event must be written, with the version the snapshot publishes
    events, stats = _run(tmp_path, 0, [(TABLE.id.bytes, _reset(TRUNCATED_MS))])
    assert events == []
    assert [(a["floor_us"], a["schema_hash"], a["reset"]) for a in stats["applied"]] == [
        (TRUNCATED_MS * 1000, TABLE.schema_hash, True)]
