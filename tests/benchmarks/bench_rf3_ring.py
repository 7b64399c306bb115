"""The materializer at RF=3 on the real ring: issue 14's second measurement beside
bench_rf3's synthetic one.

Three Cassandra nodes at RF=3 (the test ring), `casscade publisher run` beside each node,
RING_CHANGES one-row INSERTs of distinct keys into a 5-column table (bench_materializer's
shape: k int, c1 int, c2 text, c3 int, c4 text) at QUORUM, then the agents caught up: every
replica's copy of every write is in the raw topic (about three per change; the count is
printed). The job then runs availableNow over what the raw topic holds, once per entry of
RING_MODES (query:cores, query as bench_jvm_floor names it: partition = spark.state_mode
partition, tws = the default mode with the JVM copy dedupe, tws-pandas = its processor on
transformWithStateInPandas), RING_BATCH copies per
micro-batch, each from its own checkpoint over the same records; the raw topic has
RING_PARTITIONS partitions (2). Printed per run: logical
changes/s and copies/s, each per core, over the steady micro-batches (the first, with the
Python workers' start, apart), where the time went, and for partition the Python workers'
share and the copies that reached Python. One event per change is asserted.

Unlike the synthetic input, the three copies of a change come from three publishers that
do not wait for each other, so a change's copies can fall into different micro-batches; a
copy in a later batch is dropped all the same (within the copy window). Changes per batch
are counted as copies / 3, as in bench_rf3.
"""

from __future__ import annotations

import os
import sys
import time
import uuid
from pathlib import Path

from bench_materializer import _run_job, _values
from bench_rf3 import breakdown
from cpu_use import machine_busy_s, process_cpu_s

from shared.kafka_topics import read_to_end

CHANGES = int(os.environ.get("RING_CHANGES", "120000"))
PER_BATCH = int(os.environ.get("RING_BATCH", "60000"))
# partitions of the raw topic: as many as the job's cores by default, as bench_rf3's topic
# (3 partitions on 2 cores leave a core idle for a third of every micro-batch)
PARTITIONS = int(os.environ.get("RING_PARTITIONS", "2"))
RUNS = [(api, int(cores)) for api, cores in (r.split(":") for r in os.environ.get(
    "RING_MODES", "partition:2,tws:2").split(","))]


def _write(session: object, ks: str) -> float:
    """CHANGES one-row INSERTs at QUORUM, many in flight; seconds taken."""
    from cassandra.concurrent import execute_concurrent_with_args

    insert = session.prepare(  # type: ignore[attr-defined]
        f"INSERT INTO {ks}.t (k, c1, c2, c3, c4) VALUES (?, ?, ?, ?, ?)")
    started = time.monotonic()
    for start in range(0, CHANGES, 10_000):
        args = []
        for k in range(start, min(start + 10_000, CHANGES)):
            c1, c2, c3, c4 = (v for _, v in _values(k, 0))
            args.append((k, int.from_bytes(c1, "big", signed=True), c2.decode(),
                         int.from_bytes(c3, "big", signed=True), c4.decode()))
        for ok, result in execute_concurrent_with_args(session, insert, args, concurrency=96,
                                                       raise_on_first_error=True):
            assert ok, result
    return time.monotonic() - started


def _copies(bootstrap: str, prefix: str) -> dict[str, int]:
    """Records in each raw topic of `prefix` (their partitions' high watermarks; the topics
    are new). Besides the bench's table: what the agents found left in cdc_raw by an earlier
    run on the same ring, published again under this prefix, which the job reads too."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": uuid.uuid4().hex})
    try:
        topics = consumer.list_topics(timeout=10).topics
        return {name: sum(consumer.get_watermark_offsets(TopicPartition(name, p),
                                                         timeout=10)[1]
                          for p in t.partitions)
                for name, t in topics.items() if name.startswith(f"{prefix}.raw.")}
    finally:
        consumer.close()


def _nodes_cpu_s(ring: object) -> float:
    """CPU seconds the ring's Cassandra nodes have used."""
    from devstack import cassandra

    pids = [cassandra.running_pid(n) for n in ring.all_nodes()]  # type: ignore[attr-defined]
    assert None not in pids, f"a ring node is down: {pids}"
    return sum(process_cpu_s(p) for p in pids)  # type: ignore[arg-type]


def _wait_quiet(ring: object, limit_s: float = 180) -> float:
    """Wait until the nodes use under a fifth of a core (their flushes and compactions
    after the writes done), at most `limit_s`; seconds waited."""
    started = time.monotonic()
    while time.monotonic() - started < limit_s:
        used = _nodes_cpu_s(ring)
        time.sleep(5)
        if (_nodes_cpu_s(ring) - used) / 5 < 0.2:
            break
    return time.monotonic() - started


def test_bench_rf3_ring(ring, tmp_path: Path) -> None:
    """Logical changes/s per core at RF=3 from three real publishers, both state modes."""
    from cassandra import ConsistencyLevel
    from cassandra.cluster import EXEC_PROFILE_DEFAULT

    from devstack.cassandra import cql_cluster

    # ring_harness draws its workloads with the integration tests' statement strategies
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration"))
    from ring_harness import RingPublishers

    prefix = f"ring3{uuid.uuid4().hex[:6]}"
    ks = f"bench_{uuid.uuid4().hex[:6]}"
    # the agents keep their state on the ring between runs, as a node's agent does: a run
    # publishes its own writes, not again what an earlier one left in cdc_raw
    publishers = RingPublishers(ring, ring.state_dir / "bench-rf3-agents", prefix,
                                {"kafka": {"partitions": PARTITIONS}})
    cluster = cql_cluster(ring)
    cluster.profile_manager.profiles[EXEC_PROFILE_DEFAULT].consistency_level = \
        ConsistencyLevel.QUORUM
    try:
        session = cluster.connect()
        session.execute(f"CREATE KEYSPACE {ks} WITH replication = "
                        "{'class': 'SimpleStrategy', 'replication_factor': 3}")
        session.execute(f"CREATE TABLE {ks}.t (k int PRIMARY KEY, c1 int, c2 text, c3 int, "
                        "c4 text) WITH cdc = true")
        publishers.start()
        write_s = _write(session, ks)
        started = time.monotonic()
        publishers.wait_caught_up(600)
        catch_up_s = time.monotonic() - started
    finally:
        publishers.stop()
        cluster.shutdown()
    raw = f"{prefix}.raw.{ks}.t"
    counts = _copies(ring.bootstrap_servers, prefix)
    ours, copies = counts[raw], sum(counts.values())
    assert ours >= 3 * CHANGES, (ours, CHANGES)  # every replica's copy published
    print(f"\nRF=3 ring: {CHANGES:,} INSERTs at QUORUM in {write_s:.1f}s, the three "
          f"publishers caught up {catch_up_s:.1f}s later: {ours:,} copies in {raw} "
          f"({ours / CHANGES:.2f} per change); {copies - ours:,} more in the prefix's other "
          "raw topics (an earlier run's tail of cdc_raw, published again)")
    for run, (api, cores) in enumerate(RUNS):
        details: list = []
        observed: list = []
        waited = _wait_quiet(ring)
        busy, nodes = machine_busy_s(), _nodes_cpu_s(ring)
        progress = _run_job(ring, api, cores, prefix, tmp_path / f"ckpt-{run}-{api}",
                            PER_BATCH, dedupe_s=120, details=details, observed=observed)
        assert sum(n for n, _ in progress) == copies
        events = sum(1 for _ in read_to_end(ring.bootstrap_servers, f"{prefix}.{ks}.t"))
        first, steady = progress[0], progress[1:]
        rows = sum(n for n, _ in steady)
        secs = sum(ms for _, ms in steady) / 1000
        logical = rows / 3
        mode = {"partition": "spark.state_mode partition",
                "tws": "default mode (tws)"}.get(api, api)
        print(f"\nRF=3 ring, {mode}, local[{cores}]: first batch {first[0]:,} copies in "
              f"{first[1] / 1000:.1f}s; steady {rows:,} copies in {secs:.1f}s = "
              f"{logical / secs:,.0f} changes/s ({logical / secs / cores:,.0f} per core), "
              f"{rows / secs:,.0f} copies/s ({rows / secs / cores:,.0f} per core); "
              f"{events:,} events in the topic so far")
        print(breakdown(details[1:], cores, logical))
        busy, nodes = machine_busy_s() - busy, _nodes_cpu_s(ring) - nodes
        print(f"  the ring quiet after {waited:.0f}s of waiting; the whole run (start-up "
              f"included): {busy:.1f} core-s busy, of it the three nodes {nodes:.1f} core-s")
        if api == "partition":
            python_ms = sum(o["partition_state"]["python_cpu_ms"] for o in observed[1:])
            dropped = sum(o["partition_state"]["copies_dropped"] for o in observed)
            print(f"  Python workers (input read, merge, state): "
                  f"{python_ms * 1000 / logical:.0f} us per change; copies dropped in the "
                  f"tasks: {dropped:,} of {copies:,}")
    # each run appends its events to the one event topic: one per change per run
    events = sum(1 for _ in read_to_end(ring.bootstrap_servers, f"{prefix}.{ks}.t"))
    assert events == CHANGES * len(RUNS), (events, CHANGES, len(RUNS))
