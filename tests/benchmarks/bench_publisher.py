"""Publisher throughput and latency on the real stack.

(a) Throughput: 100,000 one-row INSERTs are written by Cassandra into segments, copied
    (marked COMPLETED), and the agent publishes them into the local broker: acknowledged row
    updates per second, wall clock, with the agent's CPU time.
(b) Latency: the agent runs as a process beside a fresh node; a writer inserts at a steady
    2,000 rows/s for 20 s, each row carrying its write time; a consumer of the raw topic
    measures write → raw-topic arrival of the table's records (the publisher's heartbeats in
    the raw topic skipped). Target: p99 <= 2 s with a 1 s commitlog sync.
"""

from __future__ import annotations

import json
import os
import statistics
import time
import uuid
from pathlib import Path

from cassandra.concurrent import execute_concurrent_with_args
from confluent_kafka import Consumer
from cpu_use import process_cpu_s

from devstack.cassandra import cql_cluster
from publisher.agent.agent import Agent, tune_gc
from publisher.agent.offset_store import OffsetStore
from publisher.commitlog.schema_source import FileSchemaSource
from publisher.kafka_sink import KafkaSink
from publisher.settings import PublisherConfig
from shared import topic_names
from shared.metrics import Registry
from shared.rowupdate import is_row_update
from shared.schema import catalog_from_json
from shared.system_schema import read_system_schema

from support import rowupdate_reference
from support.publisher_harness import (
    AgentProcess,
    paced,
    start_latency_table,
    start_node,
    stop_node,
    wait_for,
)
from support.reference import cdc_offsets, copy_synced_segments
from support.services import wait_for_quiet_node

ROWS = int(os.environ.get("BENCH_ROWS", "100000"))


def test_bench_publisher_throughput(stack, cql, keyspace, tmp_path) -> None:
    cql.execute(f"CREATE TABLE {keyspace}.pub (k int PRIMARY KEY, c1 int, c2 text, c3 int, "
                "c4 text) WITH cdc = true")
    schema = tmp_path / "schema.json"
    schema.write_text(json.dumps(read_system_schema(cql)))
    before = cdc_offsets(stack.cdc_raw_dir)
    insert = cql.prepare(f"INSERT INTO {keyspace}.pub (k, c1, c2, c3, c4) VALUES (?, ?, ?, ?, ?)")
    execute_concurrent_with_args(cql, insert, [(i, i, f"text-{i}", -i, "x" * 20)
                                               for i in range(ROWS)], concurrency=128)
    time.sleep(2.5)
    after = cdc_offsets(stack.cdc_raw_dir)
    cdc_raw = tmp_path / "cdc_raw"
    cdc_raw.mkdir()
    copy_synced_segments(stack.cdc_raw_dir, before, after, cdc_raw)

    config = PublisherConfig()
    config.cdc.cdc_raw = cdc_raw
    config.cdc.archive_dir = tmp_path / "archive"  # keep the published segments
    config.kafka.topic_prefix = f"bench{uuid.uuid4().hex[:6]}"
    metrics = Registry()
    sink = KafkaSink(stack.bootstrap_servers, config.kafka.topic_prefix, 6, 1, {}, metrics)
    store = OffsetStore(tmp_path / "state")
    agent = Agent(config, FileSchemaSource(schema), sink, store, metrics)
    # One-time start-up work for the life of an agent is not throughput: create the raw
    # topic (once per agent) and publish the schema (once per table; acknowledged) before
    # the clock starts.
    s0 = time.perf_counter()
    table = next(t for t in catalog_from_json(json.loads(schema.read_text())).values()
                 if (t.keyspace, t.table) == (keyspace, "pub"))
    sink.ensure_raw_topic()
    sink.ensure_schema(table)  # both cached by the sink: the agent finds them done
    startup = time.perf_counter() - s0
    wait_for_quiet_node(stack)
    tune_gc()  # as Agent.run does
    t0, c0 = time.perf_counter(), time.process_time()
    while agent.acked_total() < ROWS and time.perf_counter() - t0 < 300:
        busy = agent.step()
        sink.poll(0 if busy else 0.01)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    agent.shutdown()
    store.close()
    assert agent.acked_total() >= ROWS
    print(f"\npublisher: {ROWS:,} row updates decoded, produced and acknowledged in "
          f"{wall:.2f}s = {ROWS / wall:,.0f} rows/s (agent CPU {cpu:.2f}s incl. librdkafka "
          f"threads; topic creation and schema record before timing: {startup:.2f}s)")


def test_bench_publisher_latency(stack, tmp_path) -> None:
    node = start_node(stack, tmp_path / "node")
    cluster = cql_cluster(node)
    agent = AgentProcess(node, stack, tmp_path / "agent", http_port=18110)
    try:
        session = cluster.connect()
        insert = start_latency_table(session, agent)
        topic = topic_names.raw_topic(agent.prefix)
        consumer = Consumer({"bootstrap.servers": stack.bootstrap_servers,
                             "group.id": uuid.uuid4().hex, "auto.offset.reset": "earliest",
                             "fetch.wait.max.ms": 10})
        wait_for(lambda: topic in consumer.list_topics(timeout=5).topics, 30, "topic")
        consumer.subscribe([topic])
        rate, seconds = 2000, 20
        latencies: list[float] = []
        sent = 0
        assert agent.proc is not None
        cpu_before, started = process_cpu_s(agent.proc.pid), time.monotonic()
        for k in paced(rate, rate * seconds):
            session.execute_async(insert, (k, time.time_ns() // 1000))
            sent += 1
            msg = consumer.poll(0)
            while msg is not None:
                _take(msg, latencies)
                msg = consumer.poll(0)
        deadline = time.monotonic() + 30
        while len(latencies) < sent and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is not None:
                _take(msg, latencies)
        # the agent's own cost of the load: CPU from the first write to the last record
        # read back, and its resident memory at its peak (VmHWM) and now
        cpu_s, wall_s = process_cpu_s(agent.proc.pid) - cpu_before, time.monotonic() - started
        memory = _memory_mb(agent.proc.pid)
        consumer.close()
    finally:
        agent.stop()
        cluster.shutdown()
        stop_node(node)
    assert len(latencies) >= sent
    q = statistics.quantiles(latencies, n=100)
    print(f"\nwrite -> raw topic at {rate} writes/s for {seconds}s: p50 {q[49]:.2f}s, "
          f"p99 {q[98]:.2f}s, max {max(latencies):.2f}s ({len(latencies):,} records)")
    print(f"the agent under it: {cpu_s:.1f} cpu-s over {wall_s:.1f} s = "
          f"{cpu_s / wall_s:.3f} cores, {cpu_s / sent * 1e6:.0f} µs a write, "
          f"{cpu_s / wall_s * 1000 / rate:.3f} cores per 1,000 writes/s; resident memory "
          f"peak {memory['VmHWM']:.0f} MB, at the end {memory['VmRSS']:.0f} MB")


def _memory_mb(pid: int) -> dict[str, float]:
    """VmRSS and VmHWM (peak resident) of a process, in MB."""
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            out[key] = int(value.split()[0]) / 1024
    return out


def _take(msg, latencies: list[float]) -> None:
    """Add the write → arrival latency of a raw record of lat.t to `latencies`; the raw
    topic's other records (the publisher's heartbeats, any other table's) are no rows."""
    if not is_row_update(msg.value()):
        return
    record = rowupdate_reference.decode(msg.value())
    if (record["keyspace"], record["table"]) != ("lat", "t"):
        return
    cell = next(c for c in record["cells"] if c["column"] == "written")
    written = int.from_bytes(cell["value"], "big", signed=True)
    latencies.append((time.time_ns() // 1000 - written) / 1e6)
