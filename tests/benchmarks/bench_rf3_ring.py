"""The materializer at RF=3 on the real ring, beside Spark's own Kafka floor on the same
input, with 1 or many tables, on local[2] and on the stack's standalone cluster.

Three Cassandra nodes at RF=3 (the test ring), `casscade publisher run` beside each node.
For each count of RING_TABLES (1 by default; "1,20,100" for the many-tables comparison):
a keyspace of that many 5-column tables (raw_workload's shape: k int, c1 int, c2 text,
c3 int, c4 text), RING_CHANGES one-row INSERTs of distinct keys spread over them at QUORUM,
then the agents caught up under a prefix of its own: every replica's copy of every write is
in the prefix's one raw topic (about three per change; the count is printed), of
RING_PARTITIONS (2) partitions whatever the table count. Then, over what the raw topic
holds (the publishers' heartbeats too), for each master of RING_MASTERS ("local":
local[cores]; or spark://HOST:PORT, with the executors' cores given as a run's cores), each
entry of RING_MODES (query:cores; query as spark_runs names it: kafka-floor = Spark's Kafka
source straight into its sink, a floor topic per table, partition = the job (exactly-once,
its default), partition+alo = the job at-least-once, partition+kafka = the job with
spark_runs' BENCH_KAFKA_TUNED), availableNow with
RING_BATCH copies per micro-batch, each from its own checkpoint.

Printed per run: logical changes/s and copies/s, each per core, over the whole run (the
first micro-batch, with the Python workers' start, included: a backlog at start is what
users meet) and over the steady micro-batches, where the time went, the Python workers'
share and the copies dropped in the tasks; at the end one table of every run: changes/s per
core, the share of the floor of the same tables and master, and of the same run at the
first table count. One event per change per run of the job is asserted. Also printed, per
logical change, the CPU each part used: while the changes were written and published, the
three Cassandra nodes, the three publishers and the broker; in each run, the broker and
the query's process tree (its driver JVM and Python workers); and at the end one line per
table count with each part's ratio to the first count's, and casscade's whole cost
(publishers, the broker over the writes and the job's run, the job) as a share of the
nodes'; for a floor's run, the same share with the floor in the job's place (a bound on
casscade's share from below: RING_MODES=kafka-floor:2,arrow-floor:2,partition:2).

Unlike the synthetic input, the three copies of a change come from three publishers that
do not wait for each other, so a change's copies can fall into different micro-batches; a
copy in a later batch is dropped all the same (within the copy window). Changes per batch
are counted as copies / 3, as in bench_rf3.

With the cluster: `deploy/local/stack spark up` first, then for example
RING_TABLES=1,20,100 RING_MASTERS=local,spark://127.0.0.1:7077.
"""

from __future__ import annotations

import os
import time
import uuid
from collections import Counter
from pathlib import Path

from cpu_use import machine_busy_s, process_cpu_s, tree_cpu_s
from raw_workload import change_values, floor_topic
from spark_runs import breakdown, run_job

from shared import topic_names
from shared.kafka_topics import TopicCreator, read_to_end
from shared.rowupdate import is_row_update
from shared.rowupdate_reader import read_row_update
from shared.topic_names import TABLE_ID_SIZE

from support.kafka_topics import delete_prefixed

CHANGES = int(os.environ.get("RING_CHANGES", "120000"))
PER_BATCH = int(os.environ.get("RING_BATCH", "60000"))
# partitions of the raw topic: as many as the job's cores by default, as bench_rf3's topic
# (3 partitions on 2 cores leave a core idle for a third of every micro-batch)
PARTITIONS = int(os.environ.get("RING_PARTITIONS", "2"))
RUNS = [(api, int(cores)) for api, cores in (r.split(":") for r in os.environ.get(
    "RING_MODES", "kafka-floor:2,partition:2").split(","))]
TABLES = [int(n) for n in os.environ.get("RING_TABLES", "1").split(",")]
MASTERS = os.environ.get("RING_MASTERS", "local").split(",")
# partitions of each event topic the job makes (events.partitions; unset: the job's default)
EVENT_PARTITIONS = int(os.environ["RING_EVENT_PARTITIONS"]) if os.environ.get(
    "RING_EVENT_PARTITIONS") else None


def _write(session: object, ks: str, tables: int) -> float:
    """CHANGES one-row INSERTs at QUORUM, key k into table t<k mod tables>, many in flight;
    seconds taken."""
    from cassandra.concurrent import execute_concurrent

    inserts = [session.prepare(  # type: ignore[attr-defined]
        f"INSERT INTO {ks}.t{n} (k, c1, c2, c3, c4) VALUES (?, ?, ?, ?, ?)")
        for n in range(tables)]
    started = time.monotonic()
    for start in range(0, CHANGES, 10_000):
        statements = []
        for k in range(start, min(start + 10_000, CHANGES)):
            c1, c2, c3, c4 = (v for _, v in change_values(k, 0))
            statements.append((inserts[k % tables], (
                k, int.from_bytes(c1, "big", signed=True), c2.decode(),
                int.from_bytes(c3, "big", signed=True), c4.decode())))
        for ok, result in execute_concurrent(session, statements, concurrency=96,
                                             raise_on_first_error=True):
            assert ok, result
    return time.monotonic() - started


def _copies(bootstrap: str, prefix: str) -> int:
    """Records in the raw topic of `prefix` (its partitions' high watermarks; the topic is
    new): what the job reads, the publishers' heartbeats included."""
    from confluent_kafka import Consumer, TopicPartition

    topic = topic_names.raw_topic(prefix)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": uuid.uuid4().hex})
    try:
        meta = consumer.list_topics(topic, timeout=10).topics[topic]
        return sum(consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                   for p in meta.partitions)
    finally:
        consumer.close()


def _raw_contents(bootstrap: str, prefix: str) -> tuple[Counter[str | None], set[bytes]]:
    """What the raw topic of `prefix` holds: its records by keyspace (None: the publishers'
    heartbeats), and the first 16 bytes of every record's key (a table's id; a heartbeat's
    host), which name the floors' output topics. Besides the bench's keyspace: what the
    agents found left in cdc_raw by an earlier run on the same ring, published again under
    this prefix, which the job reads too."""
    counts: Counter[str | None] = Counter()
    heads: set[bytes] = set()
    for m in read_to_end(bootstrap, topic_names.raw_topic(prefix)):
        value = m.value()
        counts[read_row_update(value)["keyspace"] if is_row_update(value) else None] += 1
        heads.add(m.key()[:TABLE_ID_SIZE])
    return counts, heads


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


def _broker_cpu_s(stack: object) -> float:
    """CPU seconds the stack's Kafka broker has used."""
    from devstack import kafka

    pid = kafka.running_pid(stack)
    assert pid is not None, "the broker is down"
    return process_cpu_s(pid)


def _publish(ring: object, stack: object, prefix: str, ks: str, tables: int,
             cpu: dict[str, float]) -> set[bytes]:
    """`tables` CDC tables in a new keyspace, CHANGES INSERTs over them, and the three
    agents run until every copy is in `prefix`'s raw topic; the first 16 bytes of the raw
    topic's keys (`_raw_contents`). Adds to `cpu` the CPU seconds the nodes, the
    publishers and the broker used from the agents' start to their catching up."""
    from cassandra import ConsistencyLevel
    from cassandra.cluster import EXEC_PROFILE_DEFAULT

    from devstack.cassandra import cql_cluster

    from support.ring_harness import RingPublishers

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
        for n in range(tables):
            session.execute(f"CREATE TABLE {ks}.t{n} (k int PRIMARY KEY, c1 int, c2 text, "
                            "c3 int, c4 text) WITH cdc = true", timeout=60)
        publishers.start()
        agents = [a.proc.pid for a in publishers.agents.values()]
        nodes, broker = _nodes_cpu_s(ring), _broker_cpu_s(stack)
        agents_s = sum(tree_cpu_s(a) for a in agents)
        write_s = _write(session, ks, tables)
        started = time.monotonic()
        publishers.wait_caught_up(600)
        catch_up_s = time.monotonic() - started
        cpu["the three nodes"] = cpu.get("the three nodes", 0.0) + _nodes_cpu_s(ring) - nodes
        cpu["the three publishers"] = (cpu.get("the three publishers", 0.0)
                                       + sum(tree_cpu_s(a) for a in agents) - agents_s)
        cpu["the broker (writes)"] = (cpu.get("the broker (writes)", 0.0)
                                      + _broker_cpu_s(stack) - broker)
    finally:
        publishers.stop()
        cluster.shutdown()
    counts, heads = _raw_contents(ring.bootstrap_servers, prefix)  # type: ignore[attr-defined]
    ours = counts[ks]
    assert ours >= 3 * CHANGES, (ours, CHANGES)  # every replica's copy published
    others = sum(counts.values()) - ours - counts[None]
    print(f"\nRF=3 ring, {tables} table(s): {CHANGES:,} INSERTs at QUORUM in {write_s:.1f}s, "
          f"the three publishers caught up {catch_up_s:.1f}s later: {ours:,} copies "
          f"({ours / CHANGES:.2f} per change); in the raw topic besides: {counts[None]:,} "
          f"heartbeats, {others:,} records of other keyspaces (an earlier run's tail of "
          "cdc_raw, published again)")
    return heads


def _events(bootstrap: str, prefix: str, ks: str, tables: int) -> int:
    """Change events (not tombstones) on the keyspace's event topics so far (none before
    the job's first run made the topics)."""
    import contextlib

    from confluent_kafka import KafkaException

    count = 0
    for n in range(tables):
        with contextlib.suppress(KafkaException):  # not made yet
            count += sum(1 for m in read_to_end(bootstrap, f"{prefix}.{ks}.t{n}")
                         if m.value() is not None)
    return count


def test_bench_rf3_ring(stack, ring, tmp_path: Path) -> None:
    """Logical changes/s per core at RF=3 from three real publishers: each RING_MODES query
    on each RING_MASTERS master, for each RING_TABLES count."""
    whole: dict[tuple[str, str, int], float] = {}  # (query, master, tables) -> per core
    # tables -> the publishing's CPU seconds by part; (query, master, tables) -> a run's
    costs: dict[int, dict[str, float]] = {}
    runs: dict[tuple[str, str, int], dict[str, float]] = {}
    for tables in TABLES:
        prefix = f"ring3{uuid.uuid4().hex[:6]}"
        ks = f"bench_{uuid.uuid4().hex[:6]}"
        heads = _publish(ring, stack, prefix, ks, tables, costs.setdefault(tables, {}))
        copies = _copies(ring.bootstrap_servers, prefix)
        # the floor writes each record to floor_topic of its key's first 16 bytes: a table's
        # id, or a heartbeat's host (the broker makes no topic on a write)
        TopicCreator(ring.bootstrap_servers, PARTITIONS, 1).ensure_many(
            sorted(floor_topic(prefix, head) for head in heads))
        try:
            for master in MASTERS:
                for api, cores in RUNS:
                    whole[(api, master, tables)] = _run(
                        ring, stack, tmp_path, prefix, ks, tables, api, cores, master,
                        copies, runs.setdefault((api, master, tables), {}))
        finally:
            delete_prefixed(ring.bootstrap_servers, prefix, stack.kafka_dir / "data")
    print(f"\nchanges/s per core at RF=3 over the whole run ({CHANGES:,} changes, "
          f"a raw topic of {PARTITIONS} partitions; % of the floor of the same tables and "
          f"master, and of {TABLES[0]} table(s)):")
    for master in MASTERS:
        for api, cores in RUNS:
            where = f"local[{cores}]" if master == "local" else f"{master} ({cores} cores)"
            cells = []
            for tables in TABLES:
                figure = whole[(api, master, tables)]
                cell = f"{tables} table(s) {figure:,.0f}"
                floor = whole.get(("kafka-floor", master, tables))
                if floor and api != "kafka-floor":
                    cell += f" ({figure / floor:.0%} of the floor"
                    cell += (f", {figure / whole[(api, master, TABLES[0])]:.0%} of "
                             f"{TABLES[0]})" if tables != TABLES[0] else ")")
                cells.append(cell)
            print(f"  {api}, {where}: " + "; ".join(cells))
        for tables in TABLES:  # the cost of exactly-once, in the same run
            eo = whole.get(("partition", master, tables))
            alo = whole.get(("partition+alo", master, tables))
            if eo and alo:
                print(f"  {master}, {tables} table(s): exactly-once {eo:,.0f}, at-least-once "
                      f"{alo:,.0f} changes/s per core: {eo / alo:.0%}")
    _print_costs(costs, runs)


def _print_costs(costs: dict[int, dict[str, float]],
                 runs: dict[tuple[str, str, int], dict[str, float]]) -> None:
    """CPU per logical change by part, for each table count and each run of the job, with
    each part's ratio to the first table count, and casscade's share of the nodes'."""
    print(f"\nCPU per logical change, in us ({CHANGES:,} changes; x: against "
          f"{TABLES[0]} table(s)):")
    base = costs[TABLES[0]]
    for tables in TABLES:
        used = costs[tables]
        print(f"  {tables} table(s), written and published: " + ", ".join(
            f"{name} {s * 1e6 / CHANGES:.0f}" + (
                f" ({s / base[name]:.2f}x)" if tables != TABLES[0] and base[name] else "")
            for name, s in used.items()))
    for (api, master, tables), used in runs.items():
        first = runs.get((api, master, TABLES[0]), {})
        ours = (costs[tables]["the three publishers"] + costs[tables]["the broker (writes)"]
                + sum(used.values()))
        # a floor's run in the job's place bounds casscade's share from below: the same
        # publishers and broker, and a query with less to do than the job (arrow-floor:
        # the least Python, one record a change; kafka-floor: no Python, every copy out)
        whole = ("casscade in all (publishers, broker, job)" if api.split("+")[0] ==
                 "partition" else f"the publishers and broker with {api} as the job")
        print(f"  {tables} table(s), {api} on {master}: " + ", ".join(
            f"{name} {s * 1e6 / CHANGES:.0f}" + (
                f" ({s / first[name]:.2f}x)" if tables != TABLES[0] and first.get(name)
                else "") for name, s in used.items())
            + f"; {whole} {ours * 1e6 / CHANGES:.0f}: "
            f"{ours / costs[tables]['the three nodes']:.0%} of the nodes'")


def _run(ring: object, stack: object, tmp_path: Path, prefix: str, ks: str, tables: int,
         api: str, cores: int, master: str, copies: int, cpu: dict[str, float]) -> float:
    """One query over the prefix's raw topic; prints its figures and returns its changes/s
    per core over the whole run; puts in `cpu` the CPU seconds the broker and the query
    (the machine's busy time less the nodes', the broker's and this process's) used."""
    bootstrap = ring.bootstrap_servers  # type: ignore[attr-defined]
    details: list = []
    observed: list = []
    python_cpu: list = []
    waited = _wait_quiet(ring)
    before = _events(bootstrap, prefix, ks, tables)
    busy, nodes, broker = machine_busy_s(), _nodes_cpu_s(ring), _broker_cpu_s(stack)
    bench = process_cpu_s(os.getpid())
    progress = run_job(ring, api, cores, prefix,
                       tmp_path / f"ckpt-{prefix}-{api}-{master.replace('/', '_')}",
                       PER_BATCH, dedupe_s=120, details=details, observed=observed,
                       master=None if master == "local" else master, python_cpu=python_cpu,
                       event_partitions=EVENT_PARTITIONS)
    assert sum(n for n, _ in progress) == copies
    first, steady = progress[0], progress[1:]
    run_s = sum(ms for _, ms in progress) / 1000
    rows = sum(n for n, _ in steady)
    secs = sum(ms for _, ms in steady) / 1000 or float("nan")
    logical = rows / 3
    where = f"local[{cores}]" if master == "local" else f"{master}, {cores} executor cores"
    mode = api.replace("partition", "the job (partition stores)")
    per_core = CHANGES / run_s / cores
    print(f"\nRF=3 ring, {mode}, {tables} table(s), {where}: {len(progress)} batches, "
          f"{run_s:.1f}s = {per_core:,.0f} changes/s per core; first batch {first[0]:,} "
          f"copies in {first[1] / 1000:.1f}s; steady {rows:,} copies in {secs:.1f}s = "
          f"{logical / secs / cores:,.0f} changes/s per core, "
          f"{rows / secs / cores:,.0f} copies/s per core")
    if steady:
        print(breakdown(details[1:], cores, logical))
    busy, nodes = machine_busy_s() - busy, _nodes_cpu_s(ring) - nodes
    broker = _broker_cpu_s(stack) - broker
    bench = process_cpu_s(os.getpid()) - bench
    cpu["the broker"], cpu["the job"] = broker, busy - nodes - broker - bench
    print(f"  the ring quiet after {waited:.0f}s of waiting; the whole run (start-up "
          f"included): {busy:.1f} core-s busy, of it the three nodes {nodes:.1f} core-s, "
          f"the broker {broker:.1f}, this process {bench:.1f}, the query (the rest) "
          f"{cpu['the job']:.1f}")
    if api.split("+")[0] == "partition":  # the partition stores' observed metrics
        parts = [o.get("partition_state", {}) for o in observed]
        dropped = sum(p.get("copies_dropped", 0) for p in parts)
        tasks = [p.get("tasks", 0) for p in parts]
        print(f"  Python workers (the whole run, start included): "
              f"{python_cpu[0] * 1e6 / CHANGES:.0f} us per change; copies dropped in the tasks: "
              f"{dropped:,} of {copies:,}; tasks per batch {tasks}")
        # one event per change
        assert _events(bootstrap, prefix, ks, tables) - before == CHANGES
    return per_core
