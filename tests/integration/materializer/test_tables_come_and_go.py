"""Tables that come and go while the publisher and the job run, with their defaults: a table
created mid-stream streams with no restart and no new raw topic; a TRUNCATE gives the rows
it removed their `d` events, a row written again after it holds only what was written after
it, and the stream ends equal to the table (`casscade verify` passes); a dropped table's
keys' state is freed in the partition stores (both counted on /metrics) while the others
stream on."""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from devstack.settings import StackSettings, repo_root
from shared.topic_names import raw_topic

from support.materializer_harness import (
    canonical,
    final_rows,
    kill_group,
    materializer_command,
    read_events,
    start_materializer,
)
from support.publisher_harness import AgentProcess
from support.services import free_port, metric, wait_until

pytestmark = pytest.mark.integration
ROWS = 40


def _events(stack: StackSettings, topic: str) -> list[dict]:
    try:
        return [v for *_, v in read_events(stack.bootstrap_servers, topic, 5) if v]
    except AssertionError:  # no topic yet
        return []


def _verify(stack: StackSettings, prefix: str, table: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "casscade.cli", "verify", "--table", table,
         "--set", f"cassandra.port={stack.cql_port}",
         "--set", f"kafka.bootstrap_servers={stack.bootstrap_servers}",
         "--set", f"kafka.topic_prefix={prefix}", "--set", "log.format=text"],
        cwd=repo_root(), capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)


def _truncate_and_write_again(stack: StackSettings, cql, ks: str, prefix: str,
                              port: int) -> None:
    """TRUNCATE the new table, write one of its rows again and a new one: the stream's
    last images equal the table, each removed row has its `d` event, verify passes."""
    topic = f"{prefix}.{ks}.new"
    cql.execute(f"TRUNCATE {ks}.new")
    cql.execute(f"UPDATE {ks}.new SET v = 'again' WHERE k = 1")
    cql.execute(f"INSERT INTO {ks}.new (k, v) VALUES ({ROWS}, 'after')")
    table = {canonical({"k": r.k}): {"k": r.k, "v": r.v}
             for r in cql.execute(f"SELECT k, v FROM {ks}.new")}
    assert table == {canonical({"k": 1}): {"k": 1, "v": "again"},
                     canonical({"k": ROWS}): {"k": ROWS, "v": "after"}}

    def final() -> dict[str, dict]:
        return final_rows(read_events(stack.bootstrap_servers, topic, 5))

    # one truncate event in each partition of the table's topic, once every raw partition
    # has applied the truncation
    truncates = f'casscade_materializer_truncate_events_total{{table="{ks}.new"}}'
    wait_until(lambda: metric(port, truncates) == 1, 180, "the truncate events")
    # equal both ways: each key's last event, and what a consumer that truncates on `op: t`
    # holds (final_rows)
    wait_until(lambda: final() == table, 180, "the stream equal to the table after a TRUNCATE")
    events = read_events(stack.bootstrap_servers, topic, 5)
    last = {canonical(k): v["after"] for _p, _o, k, v in sorted(events, key=lambda e: e[:2])
            if k is not None and v is not None}
    assert {k: v for k, v in last.items() if v is not None} == table
    by_partition: dict[int, list[tuple[dict | None, dict]]] = {}
    for part, _o, key, value in sorted(events, key=lambda e: e[:2]):
        if value is not None:
            by_partition.setdefault(part, []).append((key, value))
    partitions = len(AdminClient({"bootstrap.servers": stack.bootstrap_servers}).list_topics(
        topic, timeout=10).topics[topic].partitions)
    assert sorted(by_partition) == list(range(partitions))
    for part, records in by_partition.items():
        at = [i for i, (key, v) in enumerate(records) if key is None and v["op"] == "t"]
        assert len(at) == 1, (part, at)  # one TRUNCATE, one truncate event
        (t,) = at
        # every row the truncation removed has its `d` before the truncate event
        assert all(i < t for i, (_k, v) in enumerate(records)
                   if v["op"] == "d" and v["source"]["file"] == "truncate"), part
        assert records[t][1]["before"] is None and records[t][1]["after"] is None
    removed = {k["k"] for _p, _o, k, v in events
               if k is not None and v is not None and v["op"] == "d"
               and v["source"]["file"] == "truncate"}
    # row 1 too, unless its write after the TRUNCATE was merged first (the agent announces
    # within 5 s): then its image ({k 1, v again}) is what the truncation leaves, no event
    assert set(range(ROWS)) - {1} <= removed <= set(range(ROWS)), removed
    keys = f'casscade_materializer_truncated_table_keys_total{{table="{ks}.new"}}'
    wait_until(lambda: metric(port, keys) == len(removed), 60, "the truncation counted")
    out = _verify(stack, prefix, f"{ks}.new")
    assert out.returncode == 0, out.stdout + out.stderr


def _reset_and_snapshot(stack: StackSettings, cql, ks: str, prefix: str, port: int,
                        state: Path) -> None:
    """`casscade snapshot --reset` of the new table (the runbook's reset of one table): its
    rows' `d` events and a second truncate event in every partition of its topic, then
    every row again from the snapshot; the stream ends equal to the table."""
    topic = f"{prefix}.{ks}.new"
    table = {canonical({"k": r.k}): {"k": r.k, "v": r.v}
             for r in cql.execute(f"SELECT k, v FROM {ks}.new")}
    cmd = [sys.executable, "-m", "casscade.cli", "snapshot", "--table", f"{ks}.new", "--reset",
           "--set", f"kafka.bootstrap_servers={stack.bootstrap_servers}",
           "--set", f"kafka.topic_prefix={prefix}", "--set", f"cassandra.port={stack.cql_port}",
           "--set", f"state.path={state}", "--splits", "4"]
    out = subprocess.run(cmd, cwd=repo_root(), capture_output=True, text=True, timeout=300,
                         stdin=subprocess.DEVNULL)
    assert out.returncode == 0, out.stderr[-3000:]
    assert f"reset of {ks}.new published at" in out.stdout
    assert f"{len(table)} rows published, 4/4 ranges" in out.stdout, out.stdout
    # run again: the progress file says the reset and every range are done
    again = subprocess.run(cmd, cwd=repo_root(), capture_output=True, text=True, timeout=300,
                           stdin=subprocess.DEVNULL)
    assert again.returncode == 0 and "reset of" not in again.stdout, again.stdout
    assert "0 rows published, 4/4 ranges" in again.stdout, again.stdout
    truncates = f'casscade_materializer_truncate_events_total{{table="{ks}.new"}}'
    wait_until(lambda: metric(port, truncates) == 2, 180, "the reset's truncate events")

    snapshot_file = f"snapshot:{ks}.new"

    def settled() -> list:
        events = read_events(stack.bootstrap_servers, topic, 5)
        rows = sum(1 for *_, v in events if v and v["source"]["file"] == snapshot_file)
        return events if rows >= len(table) and final_rows(events) == table else []

    events = wait_until(settled, 120, "the snapshot's rows after the reset, equal to the table")
    removed = []
    for part in {p for p, *_ in events}:
        ops = [(k, v["op"], v["source"]["file"]) for p, _o, k, v in sorted(
            events, key=lambda e: e[:2]) if p == part and v is not None]
        first, second = [i for i, (_k, op, _f) in enumerate(ops) if op == "t"]
        # between the TRUNCATE's and the reset's truncate events: the reset's removals
        removed += [k for k, op, f in ops[first + 1:second] if op == "d" and f == "truncate"]
        # after the reset's: the snapshot's rows (and the live rows written again)
        assert {f for _k, _op, f in ops[second + 1:]} <= {snapshot_file, "truncate"}
    assert sorted(canonical(k) for k in removed) == sorted(table)
    out = _verify(stack, prefix, f"{ks}.new")
    assert out.returncode == 0, out.stdout + out.stderr


def test_tables_made_truncated_and_dropped_while_running(stack, cql, tmp_path: Path) -> None:
    ks = f"cg_{uuid.uuid4().hex[:8]}"
    cql.execute(f"CREATE KEYSPACE {ks} WITH replication = "
                "{'class': 'SimpleStrategy', 'replication_factor': 1}")
    cql.execute(f"CREATE TABLE {ks}.gone (k int PRIMARY KEY, v text) WITH cdc = true")
    agent = AgentProcess(stack, stack, tmp_path / "agent", http_port=free_port(),
                         sections={"cdc": {"schema_refresh_s": 2}})
    port = free_port()
    agent.start()
    job = None
    log = tmp_path / "job.log"
    try:
        agent.wait_serving(60)
        for k in range(ROWS):
            cql.execute(f"INSERT INTO {ks}.gone (k, v) VALUES ({k}, 'v{k}')")
        job = start_materializer(materializer_command(
            stack, agent.prefix, tmp_path / "checkpoint", f"http.port={port}",
            available_now=False), log)
        gone = f"{agent.prefix}.{ks}.gone"
        wait_until(lambda: len(_events(stack, gone)) >= ROWS, 300, "the first table's events")
        # a table made while both run: its events come, through the same raw topic
        cql.execute(f"CREATE TABLE {ks}.new (k int PRIMARY KEY, v text) WITH cdc = true")
        for k in range(ROWS):
            cql.execute(f"INSERT INTO {ks}.new (k, v) VALUES ({k}, 'n{k}')")
        new = f"{agent.prefix}.{ks}.new"
        wait_until(lambda: len(_events(stack, new)) >= ROWS, 120, "the new table's events")
        topics = AdminClient({"bootstrap.servers": stack.bootstrap_servers}).list_topics(
            timeout=10).topics
        # one raw topic and one changelog, whatever the tables
        assert [t for t in topics if t.startswith(raw_topic(agent.prefix))] == [
            raw_topic(agent.prefix)]
        assert len([t for t in topics if t.startswith(f"{agent.prefix}.changelog.")]) == 1

        _truncate_and_write_again(stack, cql, ks, agent.prefix, port)
        _reset_and_snapshot(stack, cql, ks, agent.prefix, port, tmp_path / "snapshots")

        # the first table dropped: every key's state freed (one entry each), counted
        cql.execute(f"DROP TABLE {ks}.gone")
        freed = f'casscade_materializer_dropped_table_entries_total{{table="{ks}.gone"}}'
        wait_until(lambda: (metric(port, freed) or 0) >= ROWS, 120,
                   "the dropped table's state freed")
        assert metric(port, freed) == ROWS
        # the other table streams on
        cql.execute(f"UPDATE {ks}.new SET v = 'later' WHERE k = {ROWS}")
        wait_until(lambda: any((e["after"] or {}).get("v") == "later"
                               for e in _events(stack, new)), 120, "an event after the drop")
        assert job.poll() is None, log.read_text()[-3000:]
    finally:
        if job is not None:
            kill_group(job)
        assert agent.stop() == 0
