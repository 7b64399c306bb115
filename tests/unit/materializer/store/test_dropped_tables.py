"""A dropped table's state freed in a partition store (materializer.store.dropped_tables),
through the task's merge with real RocksDB stores: the other tables' keys untouched, a replay
of the drop's batch alike, the entries gone for good a batch later, late records left out."""

from __future__ import annotations

import json
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

from materializer.store.layout import table_prefixes
from materializer.store.partition_store import open_store
from shared.table_drop import TableDrop, decode_table_drop, encode_table_drop, is_table_drop
from shared.topic_names import raw_key

from support.events import NOW_MS, TABLE, Registry, i32, row_of
from support.task_run import run_task

OTHER = replace(TABLE, table="returns", id=uuid.UUID(int=43))
DROP = encode_table_drop(TableDrop(TABLE.id, "shop", "orders", "node-1", NOW_MS))


def _run(root: Path, batch: int, rows: list[tuple[bytes, bytes]]
         ) -> tuple[list[tuple[str, int, str]], dict[str, Any]]:
    """One task of micro-batch `batch` on partition 0: its events as (topic, key, op), and
    its stats."""
    out = run_task(root, batch, NOW_MS, rows, Registry(TABLE, OTHER))
    events = [(r["topic"], json.loads(r["key"])["id"], json.loads(r["value"])["op"])
              for r in out[:-1] if r["value"] is not None]
    return events, json.loads(out[-1]["stats"] or "{}")


def _entries(root: Path, table_id: bytes) -> int:
    """Entries of a table the stopped store of partition 0 holds (whatever their value)."""
    db = open_store(root / "p.raw" / "0")
    try:
        keys = db.keys()
        return sum(1 for k in keys if any(k.startswith(b"e" + p)  # the entries' prefix
                                          for p in table_prefixes(table_id)))
    finally:
        db.close()


def test_a_table_drop_round_trips_and_is_told_from_other_records() -> None:
    drop = decode_table_drop(DROP)
    assert drop == TableDrop(TABLE.id, "shop", "orders", "node-1", NOW_MS)
    assert drop.name == "shop.orders" and is_table_drop(DROP) and not is_table_drop(b"\x00{}")


def test_a_drop_frees_one_tables_entries_and_keeps_its_late_records_out(tmp_path) -> None:
    t0 = NOW_MS // 1000
    rows = [(raw_key(t.id, i32(k)), row_of(t, k, k, t0)) for t in (TABLE, OTHER)
            for k in range(5)]
    events, _ = _run(tmp_path, 0, rows)
    assert len(events) == 10
    # batch 1: one more change of orders, then its drop (and one of returns)
    batch1 = [(raw_key(TABLE.id, i32(0)), row_of(TABLE, 0, 50, t0 + 1)),
              (TABLE.id.bytes, DROP),
              (raw_key(OTHER.id, i32(0)), row_of(OTHER, 0, 60, t0 + 1))]
    events, stats = _run(tmp_path, 1, batch1)
    # the batch's records are merged first: the drop comes after them
    assert sorted(events) == [("p.shop.orders", 0, "u"), ("p.shop.returns", 0, "u")]
    assert stats["dropped"] == {"shop.orders": 5} and stats["late"] == 0
    # batch 1 again (not committed): the same, the store rolled back
    again, stats = _run(tmp_path, 1, batch1)
    assert sorted(again) == sorted(events) and stats["dropped"] == {"shop.orders": 5}
    assert _entries(tmp_path, TABLE.id.bytes) == 5  # removed, kept for a replay
    # batch 2: a lagging publisher's copy of orders is left out; returns flows on; the
    # drop is done for good and another drop record (another publisher's) frees nothing
    late = [(raw_key(TABLE.id, i32(1)), row_of(TABLE, 1, 70, t0 + 2)),
            (TABLE.id.bytes, DROP),
            (raw_key(OTHER.id, i32(1)), row_of(OTHER, 1, 80, t0 + 2))]
    events, stats = _run(tmp_path, 2, late)
    assert events == [("p.shop.returns", 1, "u")]
    assert stats["late"] == 1 and stats["dropped"] == {"shop.orders": 0}
    assert _entries(tmp_path, TABLE.id.bytes) == 0
    assert _entries(tmp_path, OTHER.id.bytes) == 5
