"""The partition-state merge in process (no Spark): a TTL expiry found through a store's
expiry index when another key of the partition arrives, again in a replay of that batch,
and never twice once committed (real RocksDB stores in a temporary directory)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa

from materializer.key_materializer import KeyMaterializer
from materializer.output.event_settings import EventSettings
from materializer.task.merge_loop import merge
from materializer.task.task_stores import TaskStores
from shared import rowupdate
from shared.heartbeat import Heartbeat, encode_heartbeat
from shared.topic_names import raw_key

from support.events import NOW_MS, TABLE, Registry, i32, row_of
from support.task_run import run_task

TOPIC = "p.raw"


def _ttl_row(pk: int, qty: int, ts_s: int, ttl_s: int) -> bytes:
    return rowupdate.encode({
        "table_id": TABLE.id.bytes, "keyspace": "shop", "table": "orders",
        "schema_hash": TABLE.schema_hash, "partition_key": i32(pk), "clustering": [i32(1)],
        "kind": "ROW", "shadowable": False, "range": None, "deletion": None,
        "liveness": {"timestamp": ts_s * 1_000_000, "ttl": ttl_s,
                     "local_expiration_time": ts_s + ttl_s},
        "cells": [{"column": "qty", "path": None, "value": i32(qty),
                   "timestamp": ts_s * 1_000_000, "ttl": ttl_s,
                   "local_deletion_time": ts_s + ttl_s, "tombstone": False}],
        "complex_deletions": [],
        "source": {"host": "10.0.0.1", "datacenter": "dc1", "file": "CommitLog-7-5.log",
                   "segment_id": 5, "position": 100 + pk, "index": 0, "commitlog_version": 7,
                   "messaging_version": 12}})


def _run(root: Path, batch: int, now_ms: int, rows: list[tuple[int, bytes]]
         ) -> tuple[list[tuple[int, str]], dict[str, Any]]:
    """One task of micro-batch `batch`: its events as (partition key, op), and its counts."""
    out = run_task(root, batch, now_ms, [(raw_key(TABLE.id, i32(pk)), v) for pk, v in rows],
                   Registry(TABLE), TOPIC, offset_step=10)
    events = [(json.loads(r["key"])["id"], json.loads(r["value"])["op"])
              for r in out[:-1] if r["value"] is not None]
    return events, out[-1]


def test_expiry_fires_from_the_index_when_the_partition_next_gets_a_record(tmp_path) -> None:
    t0 = NOW_MS // 1000
    row = _ttl_row(7, 5, t0, 10)
    # key 7 written with a 10 s TTL, three copies: one change, two dropped
    events, counts = _run(tmp_path, 0, NOW_MS, [(7, row), (7, row), (7, row)])
    assert events == [(7, "c")]
    assert (counts["copies_in"], counts["copies_dropped"]) == (3, 2)
    # 20 s later another key of the partition arrives: key 7's row has expired
    later = NOW_MS + 20_000
    events, _ = _run(tmp_path, 1, later, [(8, _ttl_row(8, 1, t0 + 20, 100))])
    assert sorted(events) == [(7, "d"), (8, "c")]
    # batch 1 again (its first attempt wrote everything, Spark did not commit it)
    again, _ = _run(tmp_path, 1, later, [(8, _ttl_row(8, 1, t0 + 20, 100))])
    assert sorted(again) == sorted(events)
    # once batch 1 is committed, the expiry is done: batch 2 has only its own change
    events, _ = _run(tmp_path, 2, later + 5_000, [(8, _ttl_row(8, 2, t0 + 25, 100))])
    assert events == [(8, "u")]


def test_a_batch_of_two_kafka_partitions_merges_each_in_its_own_store(tmp_path) -> None:
    """A task is given one Kafka partition, but an input batch holding two is split, not
    merged as one: each partition's keys land in its own store, copies counted per store."""
    t0 = NOW_MS // 1000
    rows = [(pk, part, _ttl_row(pk, pk, t0, 0)) for pk, part in ((1, 0), (2, 1), (3, 0))]
    rows += [(pk, part, v) for pk, part, v in rows]  # a second copy of each record
    handler = KeyMaterializer(Registry(TABLE), EventSettings(), "p")
    arrow = pa.RecordBatch.from_pydict(
        {"topic": [TOPIC] * len(rows), "key": [raw_key(TABLE.id, i32(pk)) for pk, _, _ in rows],
         "value": [v for _, _, v in rows], "partition": [p for _, p, _ in rows],
         "offset": list(range(len(rows)))})
    stores = TaskStores(tmp_path, 0, 60_000, NOW_MS)
    try:
        out = pa.Table.from_batches(list(merge(iter([arrow]), stores, handler, NOW_MS)))
        assert sorted(stores.open) == [(TOPIC, 0), (TOPIC, 1)]
    finally:
        stores.close()
    got = out.to_pylist()
    events = sorted(json.loads(r["key"])["id"] for r in got[:-1] if r["value"] is not None)
    assert events == [1, 2, 3]  # one event per change: the second copies dropped
    assert (got[-1]["copies_in"], got[-1]["copies_dropped"]) == (6, 3)


def test_a_heartbeat_alone_fires_a_due_expiry_and_is_no_change(tmp_path) -> None:
    """A partition that gets only a publisher's heartbeat still runs its expiries; the
    heartbeat is neither merged nor counted as a copy."""
    t0 = NOW_MS // 1000
    _run(tmp_path, 0, NOW_MS, [(7, _ttl_row(7, 5, t0, 10))])
    beat = encode_heartbeat(Heartbeat("node-1", NOW_MS + 20_000, {}))
    events, counts = _run(tmp_path, 1, NOW_MS + 20_000, [(0, beat)])
    assert events == [(7, "d")]
    assert (counts["copies_in"], counts["copies_dropped"]) == (0, 0)


def test_an_expiry_moved_later_fires_at_its_new_time_only(tmp_path) -> None:
    """A key rewritten with a longer TTL: the time it was first indexed at passes without a
    `d` (the index entry is stale), and the `d` comes once the new time has passed."""
    t0 = NOW_MS // 1000
    _run(tmp_path, 0, NOW_MS, [(7, _ttl_row(7, 5, t0, 10))])  # expires at t0 + 10
    events, _ = _run(tmp_path, 1, NOW_MS + 5_000, [(7, _ttl_row(7, 6, t0 + 5, 30))])
    assert events == [(7, "u")]  # now expires at t0 + 35
    beat = encode_heartbeat(Heartbeat("node-1", NOW_MS + 20_000, {}))
    events, _ = _run(tmp_path, 2, NOW_MS + 20_000, [(0, beat)])
    assert events == []  # t0 + 10 has passed, but the row lives on
    events, _ = _run(tmp_path, 3, NOW_MS + 40_000, [(0, beat)])
    assert events == [(7, "d")]
    events, _ = _run(tmp_path, 4, NOW_MS + 50_000, [(0, beat)])
    assert events == []  # once


class _Log:
    """One changelog partition in memory (partition_store.Changelog)."""

    def __init__(self, end: int | None) -> None:
        self.writes: list[tuple[bytes, bytes | None]] = []
        self.handed = end

    def end(self) -> int:
        return self.handed if self.handed is not None else len(self.writes)

    def read(self, start: int) -> Any:
        return iter(self.writes[start:])

    def write(self, key: bytes, value: bytes | None) -> None:
        self.writes.append((key, value))

    def flush(self) -> int:
        return len(self.writes)


class _Logs:
    """Changelogs in memory, counting how often the task reads their ends."""

    topic = "cl.p.raw"  # (Changelogs.topic: the job's changelog topic)

    def __init__(self) -> None:
        self.ends_read: list[dict[str, int]] = []
        self.opened: dict[tuple[str, int], _Log] = {}

    def ends(self, topics: dict[str, int]) -> dict[tuple[str, int], int]:
        self.ends_read.append(dict(topics))
        return {(t, p): 0 for t, n in topics.items() for p in range(n)}

    def partition(self, raw: str, partition: int, ends: Any = None, _txn: Any = None) -> _Log:
        log = self.opened[(raw, partition)] = _Log((ends or {}).get((f"cl.{raw}", partition)))
        return log


def test_a_task_reads_every_changelog_end_it_may_need_at_once(tmp_path) -> None:
    """However many stores a task opens, it asks Kafka for the changelogs' ends once, and
    each store starts from the end read for it."""
    logs = _Logs()
    topics = {"cl.p.raw": 6}
    stores = TaskStores(tmp_path, 0, 60_000, NOW_MS, logs, topics)  # type: ignore[arg-type]
    try:
        for p in range(6):
            stores.get("p.raw", p)
    finally:
        stores.close()
    assert logs.ends_read == [topics]
    assert len(logs.opened) == 6
    assert all(log.handed == 0 for log in logs.opened.values())


class _SlowJob:
    """An exactly-once job whose producers each take `delay` s to initialise (a round trip
    to the transaction coordinator), noting when each was taken."""

    transactional = True
    job_id = "job"

    def __init__(self, delay: float) -> None:
        self.delay = delay
        self.taken: list[tuple[int, float, float]] = []  # (partition, start, end)

    def transaction(self, _topic: str, partition: int, _owner: Path, _end: Any
                    ) -> tuple[Any, bool]:
        import time
        from types import SimpleNamespace

        start = time.monotonic()
        time.sleep(self.delay)
        self.taken.append((partition, start, time.monotonic()))
        return SimpleNamespace(init_s=self.delay), True


def test_a_tasks_new_producers_are_initialised_together(tmp_path) -> None:
    """The producers of a task's raw partitions that must be initialised are taken at once,
    before any store opens, each once: a task whose partitions moved from another Python
    worker waits for the coordinator one time, not once per partition."""
    job = _SlowJob(0.3)
    stores = TaskStores(tmp_path, 0, 60_000, NOW_MS, _Logs(),  # type: ignore[arg-type]
                        {"cl.p.raw": 3}, job)  # type: ignore[arg-type]
    stores.prepare([("p.raw", 0), ("p.raw", 2)])
    assert not stores.open  # no store opened yet
    (_, start0, end0), (_, start2, end2) = job.taken
    assert max(start0, start2) < min(end0, end2)  # the two initialisations overlapped
    for p in (0, 2, 1):
        stores.get("p.raw", p)
    assert sorted(p for p, *_ in job.taken) == [0, 1, 2]  # each taken once
    assert stores.inits == [0.3, 0.3, 0.3]


def test_a_task_counts_its_events_freshness_and_its_publishers_heartbeats(tmp_path) -> None:
    """The count row's stats: each change event's age from its write time, per table, and
    each publisher's newest heartbeat (a TTL expiry is no write: not counted)."""
    import time

    from materializer.task.task_stats import FRESHNESS_BUCKETS_S

    written_s = int(time.time()) - 3  # the change was written 3 s ago
    beats = [encode_heartbeat(Heartbeat(host, at, {}))
             for host, at in (("node-1", 5_000), ("node-2", 7_000), ("node-1", 6_000))]
    _events, counts = _run(tmp_path, 0, written_s * 1000 + 3000,
                           [(7, _ttl_row(7, 5, written_s, 3600)), *((0, b) for b in beats)])
    stats = json.loads(counts["stats"])
    assert stats["beats"] == {"node-1": 6_000, "node-2": 7_000}
    fresh = stats["fresh"]["shop.orders"]
    assert sum(fresh[:-1]) == 1 and 2.5 < fresh[-1] < 30  # one event, about 3 s old
    assert fresh[FRESHNESS_BUCKETS_S.index(5.0)] == 1  # in the (2 s, 5 s] bucket
    _events, later = _run(tmp_path, 1, (written_s + 4000) * 1000, [])
    assert later["stats"] is None  # the expiry's `d` is no write: no freshness


def test_two_tables_keys_in_one_partition_keep_their_own_state_and_topics(tmp_path) -> None:
    """One raw partition holds every table's keys: equal partition keys of two tables are
    two entries of the store (the table id leads the key), each with its own events and
    event topic; a record whose key is not a raw key, or names another table, goes to the
    dead-letter topic, and the rest flows on."""
    import uuid
    from dataclasses import replace

    other = replace(TABLE, table="returns", id=uuid.UUID(int=43))
    t0 = NOW_MS // 1000
    handler = KeyMaterializer(Registry(TABLE, other), EventSettings(), "p")
    rows = [(raw_key(TABLE.id, i32(7)), row_of(TABLE, 7, 1, t0)),
            (raw_key(other.id, i32(7)), row_of(other, 7, 2, t0)),
            (raw_key(TABLE.id, i32(7)), row_of(TABLE, 7, 3, t0 + 1)),
            (i32(7), row_of(TABLE, 7, 4, t0 + 2)),  # no table id in the key
            (raw_key(other.id, i32(8)), row_of(TABLE, 8, 5, t0 + 2))]  # another table's
    arrow = pa.RecordBatch.from_pydict(
        {"topic": [TOPIC] * len(rows), "key": [k for k, _ in rows],
         "value": [v for _, v in rows], "partition": [0] * len(rows),
         "offset": list(range(len(rows)))})
    stores = TaskStores(tmp_path, 0, 60_000, NOW_MS)
    try:
        out = pa.Table.from_batches(list(merge(iter([arrow]), stores, handler, NOW_MS)))
    finally:
        stores.close()
    got = [r for r in out.to_pylist()[:-1] if r["value"] is not None]
    by_topic: dict[str, list[Any]] = {}
    for r in got:
        by_topic.setdefault(r["topic"], []).append(json.loads(r["value"]))
    assert [(e["op"], e["after"]["qty"]) for e in by_topic["p.shop.orders"]] == [("c", 1),
                                                                                 ("u", 3)]
    assert [(e["op"], e["after"]["qty"]) for e in by_topic["p.shop.returns"]] == [("c", 2)]
    dead = by_topic["p.materializer.dead-letter"]
    assert len(dead) == 2 and [d["offset"] for d in dead] == [3, 4]
    assert "not 4 bytes" in dead[0]["error"] and "shop.orders" in dead[1]["error"]
    # the task's stats count them by the topic they came for (here the raw topic)
    assert json.loads(out.to_pylist()[-1]["stats"])["dead"] == {TOPIC: 2}
