"""No table starves another: the live events of table B while a snapshot of table A streams.

A node of its own with its agent and the job (`casscade materializer run`, local[2], trigger
1 s, its defaults); table A of SNAP_ROWS rows (5 columns, loaded with CDC off, then CDC
turned on: the load is not in the commit log), lat.t (table B) written at LIVE_RATE rows/s
throughout. For each rate of SNAP_RATES (`casscade snapshot --rate`; 0 = as fast as it
goes), a snapshot of a table A of its own (a snapshot of rows the job has seen writes no
event, so each rate gets fresh rows) from its start until the job has read the raw topic to
its end. Printed per rate: the snapshot's seconds and rows/s, the seconds until the job had
caught up, and B's write -> event latency over that time (p50, p99, max, every event
arrived). All of A's rows and B's writes share the one raw topic: B's records wait behind
the snapshot's in each partition, so B's latency is bounded only while the snapshot's rate
stays below what the job merges beside the live writes.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path

from cassandra.cluster import EXEC_PROFILE_DEFAULT
from cassandra.concurrent import execute_concurrent_with_args
from confluent_kafka import Consumer

from devstack.cassandra import cql_cluster
from shared.topic_names import event_topic, raw_topic

from support.materializer_harness import kill_group, materializer_command, start_materializer
from support.publisher_harness import (
    AgentProcess,
    paced,
    start_latency_table,
    start_node,
    stop_node,
    wait_for,
)
from support.ring_harness import job_caught_up, topic_ends

ROWS = int(os.environ.get("SNAP_ROWS", "1000000"))
RATES = [float(r) for r in os.environ.get("SNAP_RATES", "0,4000").split(",")]
LIVE_RATE = int(os.environ.get("LIVE_RATE", "50"))


def test_bench_snapshot_beside_live_writes(stack, tmp_path: Path) -> None:
    """B's write -> event latency while a snapshot of A streams, per snapshot rate."""
    node = start_node(stack, tmp_path / "node")
    cluster = cql_cluster(node)
    # the node flushes and compacts as the load goes on
    cluster.profile_manager.profiles[EXEC_PROFILE_DEFAULT].request_timeout = 120
    agent = AgentProcess(node, stack, tmp_path / "agent", http_port=18114)
    job = None
    try:
        session = cluster.connect()
        session.execute("CREATE KEYSPACE snap WITH replication = "
                        "{'class': 'SimpleStrategy', 'replication_factor': 1}")
        for i in range(len(RATES)):
            _load(session, f"snap.a{i}")
        insert = start_latency_table(session, agent)
        ckpt = tmp_path / "ckpt"
        job = start_materializer(materializer_command(
            stack, agent.prefix, ckpt, "spark.trigger_interval_ms=1000", available_now=False),
            tmp_path / "job.log")
        consumer = Consumer({"bootstrap.servers": stack.bootstrap_servers,
                             "group.id": uuid.uuid4().hex, "auto.offset.reset": "earliest",
                             "fetch.wait.max.ms": 10, "isolation.level": "read_committed"})
        topic = event_topic(agent.prefix, "lat", "t")

        def started() -> bool:
            assert job.poll() is None, f"the job exited: see {tmp_path / 'job.log'}"
            return topic in consumer.list_topics(timeout=5).topics

        wait_for(started, 240, "event topic")
        consumer.subscribe([topic])
        seen: dict[int, float] = {}
        wait_for(lambda: _poll(consumer, seen) > 0, 120, "the first event")
        key = 0
        for i, rate in enumerate(RATES):
            seen.clear()
            first = key
            cmd = [sys.executable, "-m", "casscade.cli", "snapshot", "--table", f"snap.a{i}",
                   "--config", str(agent.config), "--consistency", "ONE",
                   "--rate", str(rate), "--state", str(tmp_path / f"snap{i}.json")]
            started_at = time.monotonic()
            with (tmp_path / f"snap{i}.log").open("wb") as errors:
                snapshot = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=errors)
            snapshot_s = caught_up_s = None
            ends: dict[int, int] = {}  # the raw topic's ends when the snapshot was done
            ticks = paced(LIVE_RATE, 10**9)
            while caught_up_s is None:
                for _ in range(LIVE_RATE):  # a second of live writes, then look around
                    key = first + next(ticks)
                    session.execute_async(insert, (key, time.time_ns() // 1000))
                    _poll(consumer, seen, 0)
                assert job.poll() is None, f"the job exited: see {tmp_path / 'job.log'}"
                if snapshot_s is None and snapshot.poll() is not None:
                    assert snapshot.returncode == 0, (tmp_path / f"snap{i}.log").read_text()
                    snapshot_s = time.monotonic() - started_at
                    ends = topic_ends(stack.bootstrap_servers, raw_topic(agent.prefix))
                if snapshot_s is not None and job_caught_up(
                        ckpt, stack.bootstrap_servers, raw_topic(agent.prefix), ends):
                    caught_up_s = time.monotonic() - started_at
            written = key - first + 1
            key += 1
            deadline = time.monotonic() + 60
            while len(seen) < written and time.monotonic() < deadline:
                _poll(consumer, seen, 0.2)
            latencies = [seen[k] for k in range(first, first + written) if k in seen]
            q = statistics.quantiles(latencies, n=100)
            print(f"\nsnapshot of {ROWS:,} rows at --rate {rate:g}: "
                  f"{snapshot_s:.0f}s ({ROWS / snapshot_s:,.0f} rows/s); the job caught up "
                  f"{caught_up_s:.0f}s after its start. Table B at {LIVE_RATE} writes/s "
                  f"meanwhile: {len(latencies):,} of {written:,} events, write -> event "
                  f"p50 {q[49]:.2f}s, p99 {q[98]:.2f}s, max {max(latencies):.2f}s")
            assert len(latencies) == written, f"{len(latencies)} of {written} B events"
        consumer.close()
    finally:
        if job is not None:
            kill_group(job)
        agent.stop()
        cluster.shutdown()
        stop_node(node)


def _load(session, table: str) -> None:
    """`table` with ROWS rows of 5 columns, written with CDC off, then CDC on."""
    session.execute(f"CREATE TABLE {table} (k int PRIMARY KEY, c1 int, c2 text, c3 int, "
                    "c4 text)")
    insert = session.prepare(f"INSERT INTO {table} (k, c1, c2, c3, c4) VALUES (?, ?, ?, ?, ?)")
    started = time.monotonic()
    failed = [k for k, (ok, _) in zip(range(ROWS), execute_concurrent_with_args(
        session, insert, ((k, k, f"text-{k}", -k, "x" * 20) for k in range(ROWS)),
        concurrency=32, raise_on_first_error=False, results_generator=True), strict=True)
        if not ok]
    for k in failed:  # once more, one at a time
        session.execute(insert, (k, k, f"text-{k}", -k, "x" * 20))
    session.execute(f"ALTER TABLE {table} WITH cdc = true")
    print(f"\n{table}: {ROWS:,} rows loaded in {time.monotonic() - started:.0f}s")


def _poll(consumer: Consumer, seen: dict[int, float], timeout: float = 1.0) -> int:
    """Read what is there: the latency of each `c` event of B by key (its first only); how
    many B events are known."""
    import json

    msg = consumer.poll(timeout)
    while msg is not None:
        if msg.error() is None and msg.value():
            event = json.loads(msg.value())
            after = event.get("after")
            if event.get("op") == "c" and after:
                seen.setdefault(after["k"], (time.time_ns() // 1000 - after["written"]) / 1e6)
        msg = consumer.poll(0)
    return len(seen)
