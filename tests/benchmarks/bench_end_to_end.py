"""End-to-end latency: Cassandra write → agent → raw topic → Spark job → change event.

A fresh node with the agent beside it and the materializer (`casscade materializer run`,
default local[2], trigger every `spark.trigger_interval_ms`) following the agent's raw topic;
a writer inserts at a steady RATE rows/s for WARMUP_S + SECONDS s, each row carrying its
write time; a consumer of the event topic measures write → event arrival for the rows of the
last SECONDS s. Design §7 target: p50 <= 2 s,
p99 <= 5 s with a 1 s commitlog sync. `test_bench_end_to_end_latency_rf3` does the same on the
test ring (three nodes at RF=3, writes at QUORUM, a publisher beside each node), where every
change reaches the job three times (issue 14's goal there: p50 <= 2 s, p99 <= 4 s), once for
each count of BENCH_TABLES (1; "1,100": the writes spread round-robin over that many tables,
each run with its own prefix, publishers and job), and then measures the cores each process
used over QUIET_S s with no writes at all (the job's cost of quiet tables). There the job
starts at BENCH_START of the raw topic (`kafka.starting_offsets`): "latest" by default, so
that what earlier runs left in the ring's `cdc_raw` (published into the run's raw topic
before the job starts) is not replayed, and the writes start once the job has reported a
micro-batch with input (the publishers' heartbeats: its Python workers have started, which
bench_first_event measures); "earliest" replays it, and the writes start at the job's
first event. With BENCH_RESTART=1 (the default) the job is then stopped (SIGTERM) and
started again on its checkpoint, and the same writes are measured from its first
micro-batch on. Before its first run the ring takes RING_WARMUP_S s of the same writes into a
table without CDC: a cluster in service has compiled its write path, while a ring started a
minute ago spends the two cores doing so through the first run's minute (measured: p99 8.25 s
on a fresh ring, 3.45-4.75 s for the same job, the JVM's default JIT, in later runs of the
same session). BENCH_DRIVER_JIT
(spark.driver_jit, "c1" by default; "c1,tiered,c1,tiered" alternates) repeats each run with
each entry. Each RF=3 result also splits every write's latency where its first copy
reached the raw topic (a consumer of it beside the events' consumer): Cassandra with the
publishers before, the job after; and prints the median of each micro-batch phase
(Spark's durationMs) over the batches seen. After each table count, BENCH_FLOOR_S (20) s
of Kafka's own floor for the same load (`event_floor`): the same events written by the
job's transactional producers alone, one per raw partition, with the broker's cores; then
the same by Kafka's Java producer (BENCH_FLOOR_CLIENTS, "librdkafka,java").
"""

from __future__ import annotations

import json
import os
import signal
import statistics
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer
from cpu_use import JVM_THREADS, job_split_s, machine_busy_s, process_cpu_s, tree_cpu_s
from event_floor import Load, idle_cores
from event_floor import run as run_floor
from spark_runs import transactions_line

from devstack import cassandra, kafka
from devstack.artifacts import lib_dir
from devstack.cassandra import cql_cluster
from materializer.kafka.start_topics import raw_partitions
from materializer.spark.progress import PARTITION_METRICS
from shared.rowupdate import VERSION_BYTE, mutation_time_of_value
from shared.topic_names import raw_topic

from support.kafka_topics import delete_prefixed
from support.materializer_harness import kill_group, materializer_command, start_materializer
from support.publisher_harness import (
    AgentProcess,
    paced,
    start_latency_table,
    start_node,
    stop_node,
    wait_for,
)
from support.services import http_get

RATE = int(os.environ.get("BENCH_RATE", "2000"))
SECONDS = int(os.environ.get("BENCH_SECONDS", "30"))
# written at the same rate first, not measured: the job's first micro-batches are slow
# (Python workers starting, the JVM compiling the query's code)
WARMUP_S = int(os.environ.get("BENCH_WARMUP_S", "60"))
TRIGGER_MS = int(os.environ.get("BENCH_TRIGGER_MS", "1000"))
TABLES = [int(n) for n in os.environ.get("BENCH_TABLES", "1").split(",")]
# the RF=3 runs, each table count with each events.delivery, one after the other
DELIVERIES = os.environ.get("BENCH_DELIVERY", "exactly-once,at-least-once").split(",")
QUIET_S = int(os.environ.get("BENCH_QUIET_S", "60"))
RING_WARMUP_S = int(os.environ.get("BENCH_RING_WARMUP_S", "60"))
JITS = os.environ.get("BENCH_DRIVER_JIT", "c1").split(",")  # the RF=3 job's spark.driver_jit
START = os.environ.get("BENCH_START", "latest")  # the RF=3 job's kafka.starting_offsets
RESTART = os.environ.get("BENCH_RESTART", "1") == "1"  # the RF=3 runs measure a restart too
# more of the job's settings, space-separated (spark.conf.spark.eventLog.enabled=true ...)
JOB_SETS = os.environ.get("BENCH_JOB_SETS", "").split()
HTTP_PORT = 18112
LAST_BREAKDOWN: list = []  # the last progress report seen: where a micro-batch's time goes
PHASES: dict[int, dict[str, int]] = {}  # each batch seen: its durationMs, by phase
JOB_PART = "job/"  # _cpu's entries of the job's parts (cpu_use.job_split_s)
# after each RF=3 table count: Kafka's own floor for its load, measured for this long (0: not)
FLOOR_S = int(os.environ.get("BENCH_FLOOR_S", "20"))
# the floor's clients: the job's (librdkafka) and Kafka's Java producer (event_floor)
FLOOR_CLIENTS = os.environ.get("BENCH_FLOOR_CLIENTS", "librdkafka,java").split(",")


def test_bench_end_to_end_latency(stack, tmp_path) -> None:
    """One node, its agent, the job."""
    node = start_node(stack, tmp_path / "node")
    cluster = cql_cluster(node)
    agent = AgentProcess(node, stack, tmp_path / "agent", http_port=18111)
    job = None
    try:
        session = cluster.connect()
        insert = start_latency_table(session, agent)
        job = _start_job(stack, agent.prefix, tmp_path)
        result = _measure(session, [insert], stack.bootstrap_servers, agent.prefix,
                          [f"{agent.prefix}.lat.t"], job)
    finally:
        if job is not None:
            kill_group(job)
        agent.stop()
        cluster.shutdown()
        stop_node(node)
    _report("one node", *result)


def test_bench_end_to_end_latency_rf3(stack, ring, tmp_path) -> None:
    """Three nodes at RF=3 (writes at QUORUM, spread by the driver), a publisher beside each
    node, the job: every change reaches the job three times. Also printed: where the two
    cores went over the measured seconds and over QUIET_S quiet ones, per process tree."""
    _warm_ring(ring)
    runs = [(count, delivery, jit) for count in TABLES for delivery in DELIVERIES
            for jit in JITS]
    for i, (count, delivery, jit) in enumerate(runs):
        _latency_rf3(stack, ring, tmp_path / f"{i}-tables{count}-{delivery}-{jit}", count,
                     delivery, jit)


def _quorum_cluster(ring: Any) -> Any:
    """A driver cluster for the ring, its statements at QUORUM."""
    from cassandra import ConsistencyLevel
    from cassandra.cluster import EXEC_PROFILE_DEFAULT

    cluster = cql_cluster(ring)
    cluster.profile_manager.profiles[EXEC_PROFILE_DEFAULT].consistency_level = \
        ConsistencyLevel.QUORUM
    return cluster


def _warm_ring(ring: Any) -> None:
    """RING_WARMUP_S s of writes at RATE into a table without CDC (no publisher reads
    them), so that the nodes have compiled their write path before a job is measured. The
    table stays: its writes share commit log segments with CDC tables' and so reach
    `cdc_raw`, where a publisher started after a DROP would keep them back as an unknown
    table's (docs/operations.md), and a ring kept running for the next session's runs
    would never be caught up."""
    from cassandra import WriteTimeout

    if RING_WARMUP_S <= 0:
        return
    cluster = _quorum_cluster(ring)
    try:
        session = cluster.connect()
        session.execute("CREATE KEYSPACE IF NOT EXISTS latwarm WITH replication = "
                        "{'class': 'SimpleStrategy', 'replication_factor': 3}")
        session.execute("CREATE TABLE IF NOT EXISTS latwarm.t (k int PRIMARY KEY, "
                        "written bigint)")
        insert = session.prepare("INSERT INTO latwarm.t (k, written) VALUES (?, ?)")
        futures = [session.execute_async(insert, (k, time.time_ns() // 1000))
                   for k in paced(RATE, RATE * RING_WARMUP_S)]
        timeouts = 0
        for future in futures:
            try:
                future.result()
            except WriteTimeout:  # a node still compiling: the point of warming it
                timeouts += 1
        if timeouts:
            print(f"ring warm-up: {timeouts} of {len(futures)} writes timed out")
    finally:
        cluster.shutdown()


def _latency_rf3(stack: Any, ring: Any, tmp_path: Path, count: int,
                 delivery: str = "exactly-once", jit: str = "c1") -> None:
    """The RF=3 run with the writes spread over `count` tables, events.delivery
    `delivery`, the job's spark.driver_jit `jit`."""
    from support.ring_harness import RingPublishers

    prefix = f"lat3{uuid.uuid4().hex[:6]}"
    tmp_path.mkdir(parents=True)
    publishers = RingPublishers(ring, tmp_path, prefix)
    cluster = _quorum_cluster(ring)
    job = None
    try:
        session = cluster.connect()
        ks = f"lat_{uuid.uuid4().hex[:6]}"
        session.execute(f"CREATE KEYSPACE {ks} WITH replication = "
                        "{'class': 'SimpleStrategy', 'replication_factor': 3}")
        names = [f"t{i}" for i in range(count)]
        for name in names:
            session.execute(f"CREATE TABLE {ks}.{name} (k int PRIMARY KEY, written bigint) "
                            "WITH cdc = true")
        publishers.start()
        inserts = [session.prepare(f"INSERT INTO {ks}.{name} (k, written) VALUES (?, ?)")
                   for name in names]
        for insert in inserts:  # each table's schema published before the job starts
            session.execute(insert, (-1, time.time_ns() // 1000))
        publishers.wait_caught_up()
        raws = raw_partitions({"bootstrap.servers": ring.bootstrap_servers}, prefix)
        job = _start_job(ring, prefix, tmp_path, delivery, START, jit)
        nodes = [cassandra.running_pid(n) for n in ring.all_nodes()]
        broker = kafka.running_pid(stack)
        assert None not in nodes and broker is not None, (nodes, broker)
        trees = {"the three nodes": nodes,
                 "the three publishers": [a.proc.pid for a in publishers.agents.values()],
                 "Kafka": [broker], "the job": [job.pid]}
        topics = [f"{prefix}.{ks}.{name}" for name in names]
        results = [("", _measure(session, inserts, ring.bootstrap_servers, prefix, topics, job,
                                 lambda: _cpu(trees), from_progress=START == "latest"))]
        if RESTART:
            _stop_job(job)
            job = _start_job(ring, prefix, tmp_path, delivery, START, jit)
            trees["the job"] = [job.pid]
            results.append((", after a restart of the job", _measure(
                session, inserts, ring.bootstrap_servers, prefix, topics, job,
                lambda: _cpu(trees),
                from_progress=True, first_key=RATE * (WARMUP_S + SECONDS))))
        before, started = _cpu(trees), time.monotonic()
        time.sleep(QUIET_S)  # no writes: heartbeats only
        after, wall = _cpu(trees), time.monotonic() - started
        assert job.poll() is None, f"the job exited ({job.returncode}): see its job.log"
        quiet = {name: (used - before.get(name, 0.0)) / wall  # (a new thread's whole)
                for name, used in after.items()}
    finally:
        if job is not None:
            kill_group(job)
        publishers.stop()
        cluster.shutdown()
        # 100 tables' topics per run, their logs removed before the next run
        delete_prefixed(ring.bootstrap_servers, prefix, stack.kafka_dir / "data")
    for when, result in results:
        _report(f"three nodes at RF=3, a publisher each, {count} table(s), {delivery}, "
                f"spark.driver_jit {jit}, the job starting at the raw topic's {START} "
                f"offsets{when}", *result)
    machine = quiet.pop("machine")
    parts = _job_line(quiet)
    print(f"cores busy over {QUIET_S}s with no writes, {count} table(s), {delivery}: "
          f"{machine:.2f}: "
          + ", ".join(f"{name} {used:.2f}" for name, used in quiet.items()))
    print(f"  {parts}")
    if FLOOR_S > 0:
        # the same events, written by the job's transactional producers alone (one per raw
        # partition, a transaction each a second, events.partitions' default 1): what this
        # load costs the broker at best, on the same broker in the same run; then by Kafka's
        # Java producer, which puts a broker's partitions in one request
        raw = raws[raw_topic(prefix)]
        for client in FLOOR_CLIENTS:
            floor = run_floor(ring.bootstrap_servers, broker, idle_cores(broker),
                              Load("paced", count, 1, raw, RATE, FLOOR_S), client,
                              lib_dir(stack.lib_dir, "kafka"))
            print(f"Kafka's own floor for this load, {count} table(s), {raw} producers "
                  f"alone (one per raw partition), {client}: {floor.line}")


def _cpu(trees: dict[str, list[int]]) -> dict[str, float]:
    """CPU seconds so far: each group of process trees, this process (the writer and the
    consumer), the whole machine."""
    used = {name: sum(tree_cpu_s(p) for p in pids) for name, pids in trees.items()}
    job = {f"{JOB_PART}{name}": s for name, s in job_split_s(trees["the job"][0]).items()}
    return {**used, "this bench (writer, consumer)": process_cpu_s(os.getpid()),
            **job, "machine": machine_busy_s()}


def _job_line(cores: dict[str, float]) -> str:
    """The job's parts (JOB_PART entries, taken out of `cores`) as one line."""
    parts = {name[len(JOB_PART):]: cores.pop(name) for name in list(cores)
             if name.startswith(JOB_PART)}
    if not parts:
        return "the job's parts: not read (the job had exited)"
    jvm = parts.pop("the driver JVM")
    threads = {name: 0.0 for name, _ in JVM_THREADS}
    for key in [k for k in parts if "/" in k]:  # a thread's: "<group>/<thread id>"
        threads[key.split("/")[0]] += parts.pop(key)
    return (f"the job's parts: the driver JVM {jvm:.2f} ("
            + ", ".join(f"{name} {used:.2f}" for name, used in threads.items())
            + f", the rest, threads that ended too, {jvm - sum(threads.values()):.2f}), "
            + ", ".join(f"{name} {used:.2f}" for name, used in parts.items()))


def _start_job(stack: Any, prefix: str, tmp_path: Path, delivery: str = "exactly-once",
               start: str = "earliest", jit: str = "c1") -> Any:
    """The materializer following `prefix`'s raw topic, triggered every TRIGGER_MS, from
    `start` (kafka.starting_offsets) on a new checkpoint, spark.driver_jit `jit`."""
    return start_materializer(materializer_command(
        stack, prefix, tmp_path / "ckpt", f"spark.trigger_interval_ms={TRIGGER_MS}",
        f"http.port={HTTP_PORT}", f"events.delivery={delivery}",
        f"kafka.starting_offsets={start}", f"spark.driver_jit={jit}", *JOB_SETS,
        available_now=False),
        tmp_path / "job.log")


def _stop_job(job: Any) -> None:
    """SIGTERM the job and wait for its clean exit (what remains of its group killed)."""
    job.send_signal(signal.SIGTERM)
    try:
        code = job.wait(120)
    finally:
        kill_group(job)
    assert code == 0, f"the job exited {code} on SIGTERM: see its job.log"


class _Arrivals:
    """When (µs, this host's clock) each measured write's first copy reached the raw topic
    and its change event the event topic, by the write's time (a raw copy's mutation time,
    an event's source.ts_us): what splits the latency between Cassandra with the publishers
    and the job."""

    def __init__(self) -> None:
        self.since_us = 0  # writes before this are not measured (set when they start)
        self.raw: dict[int, int] = {}
        self.event: dict[int, int] = {}

    def split(self) -> tuple[list[float], list[float]]:
        """For each write with an event and a raw copy seen: seconds from the write to its
        first copy in the raw topic, and from that copy to its event."""
        to_raw, to_event = [], []
        for ts, at in self.event.items():
            first = self.raw.get(ts)
            if first is not None:
                to_raw.append((first - ts) / 1e6)
                to_event.append((at - first) / 1e6)
        return to_raw, to_event


Measured = tuple[list[float], int, dict[int, tuple[int, int, str]], dict[str, float], _Arrivals]


def _measure(session: Any, inserts: list[Any], bootstrap: str, prefix: str, topics: list[str],
             job: Any, cpu: Callable[[], dict[str, float]] | None = None,
             from_progress: bool = False, first_key: int = 0) -> Measured:
    """Write at RATE for WARMUP_S + SECONDS s, round-robin over the tables of `inserts`
    (their events in `topics`, their raw copies in `prefix`'s raw topic), keys from
    `first_key` on; the latency of every event of the last SECONDS s, how many rows were
    measured, the micro-batches seen, (with `cpu`, a clock of CPU seconds by name) the cores
    each name used over the measured writes, and when the measured writes' first raw copies
    and events arrived; fails at once if `job` (the materializer process) exits. The writes
    start at the job's first event, or with `from_progress` at its first progress report of
    a micro-batch with input (the publishers' heartbeats, say: its Python workers started)."""
    latencies: list[float] = []
    batches: dict[int, tuple[int, int, str]] = {}  # batch id → (input rows, trigger ms)
    arrivals = _Arrivals()

    def consumer_of(isolation: str) -> Consumer:
        return Consumer({"bootstrap.servers": bootstrap, "group.id": uuid.uuid4().hex,
                         "auto.offset.reset": "earliest", "fetch.wait.max.ms": 10,
                         "isolation.level": isolation})

    consumer = consumer_of("read_committed")
    raw = consumer_of("read_uncommitted")  # the publishers do not write in transactions
    raw.subscribe([raw_topic(prefix)])
    try:
        # the job's first event (Spark and its Python workers started) before the clock
        def started() -> bool:
            assert job.poll() is None, f"the job exited ({job.returncode}): see its job.log"
            return set(topics) <= set(consumer.list_topics(timeout=5).topics)

        wait_for(started, 240, "event topics")
        consumer.subscribe(topics)
        if from_progress:
            wait_for(lambda: _progress(job), 240, "the job's first micro-batch with input")
        else:
            wait_for(lambda: _poll(consumer, [], 0) > 0, 120, "the first event")
        warmup = first_key + RATE * WARMUP_S  # rows below this key are not measured
        before: dict[str, float] = {}
        for i in paced(RATE, RATE * (WARMUP_S + SECONDS)):
            k = first_key + i
            if k == warmup:
                arrivals.since_us = time.time_ns() // 1000
                if cpu is not None:
                    before, started = cpu(), time.monotonic()
            session.execute_async(inserts[k % len(inserts)], (k, time.time_ns() // 1000))
            _poll(consumer, latencies, warmup, 0, arrivals)
            _poll_raw(raw, arrivals)
            if (k + 1) % RATE == 0:
                _batch(batches)
        cores: dict[str, float] = {}
        if before:
            after, wall = cpu(), time.monotonic() - started  # type: ignore[misc]
            cores = {name: (used - before.get(name, 0.0)) / wall  # (a new thread's whole)
                    for name, used in after.items()}
        deadline = time.monotonic() + 120
        while len(latencies) < RATE * SECONDS and time.monotonic() < deadline:
            _poll(consumer, latencies, warmup, 0.2, arrivals)
            _poll_raw(raw, arrivals)
            _batch(batches)
    finally:
        consumer.close()
        raw.close()
    return latencies, RATE * SECONDS, batches, cores, arrivals


def _progress(job: Any) -> bool:
    """Whether the job (failing if it exited) has reported a micro-batch with input (so
    its tasks, and the Python workers they start, have run)."""
    assert job.poll() is None, f"the job exited ({job.returncode}): see its job.log"
    code, body = http_get(HTTP_PORT, "/status")
    last = json.loads(body).get("last_progress") if code == 200 else None
    return bool(last and last["numInputRows"])


def _report(what: str, latencies: list[float], measured: int,
            batches: dict[int, tuple[int, int, str]], cores: dict[str, float],
            arrivals: _Arrivals) -> None:
    assert len(latencies) >= measured, f"{len(latencies)} of {measured} arrived"
    print(f"\n{what}: write -> change event at {RATE} "
          f"writes/s for {SECONDS}s after "
          f"{WARMUP_S}s, trigger {TRIGGER_MS} ms: {_quantiles(latencies)} "
          f"({len(latencies):,} events)")
    to_raw, to_event = arrivals.split()
    assert to_raw, "no measured write's raw copy was seen"
    print(f"  of which write -> its first copy in the raw topic (Cassandra, the publishers): "
          f"{_quantiles(to_raw)}; that copy -> the change event (the job): "
          f"{_quantiles(to_event)} ({len(to_raw):,} writes)")
    seen = sorted(batches.items())
    print("micro-batches seen (id: rows, ms, transactions):\n"
          + "\n".join(f"  {b}: {n}, {ms}{txn}" for b, (n, ms, txn) in seen))
    print(f"last batch seen (id, rows, where its time went in ms): {LAST_BREAKDOWN}")
    phases = [PHASES[b] for b, _ in seen if b in PHASES]
    if phases:
        names = sorted({name for p in phases for name in p})
        print(f"median ms of each phase over the {len(phases)} batches seen: "
              + ", ".join(f"{name} {statistics.median(p.get(name, 0) for p in phases):.0f}"
                          for name in names))
    if cores:
        machine = cores.pop("machine")
        parts = _job_line(cores)
        print(f"cores busy over the measured writes: {machine:.2f} of {os.cpu_count()}: "
              + ", ".join(f"{name} {used:.2f}" for name, used in cores.items())
              + f", the rest {machine - sum(cores.values()):.2f}")
        print(f"  {parts}")


def _quantiles(seconds: list[float]) -> str:
    """p50, p99 and max of `seconds`."""
    q = statistics.quantiles(seconds, n=100)
    return f"p50 {q[49]:.2f}s, p99 {q[98]:.2f}s, max {max(seconds):.2f}s"


def _batch(batches: dict[int, tuple[int, int, str]]) -> None:
    """The job's last progress report (its /status), by batch id."""
    code, body = http_get(HTTP_PORT, "/status")
    if code != 200:
        return  # not serving yet
    last = json.loads(body)["last_progress"]
    if last:
        # the partition stores' task counts (copies, stores, their stats): as a Row's
        # values (a list, the stats last) or by name
        stores = (last.get("observedMetrics") or {}).get(PARTITION_METRICS) or {}
        stats = stores.get("stats") if isinstance(stores, dict) else (
            stores[-1] if stores and isinstance(stores[-1], list) else None)
        batches[last["batchId"]] = (last["numInputRows"],
                                    last["durationMs"].get("triggerExecution", 0),
                                    transactions_line(stats))
        LAST_BREAKDOWN[:] = [last["batchId"], last["numInputRows"], last["durationMs"]]
        PHASES[last["batchId"]] = last["durationMs"]


def _poll(consumer: Consumer, latencies: list[float], first: int, timeout: float = 1.0,
          arrivals: _Arrivals | None = None) -> int:
    """Read what is there; the latency of each `c` event of a row with key >= `first` (and
    its arrival in `arrivals`). Returns how many events were read."""
    n = 0
    msg = consumer.poll(timeout)
    while msg is not None:
        n += 1
        if msg.error() is None and msg.value():
            event = json.loads(msg.value())
            after = event.get("after")
            if event.get("op") == "c" and after and after["k"] >= first:
                now = time.time_ns() // 1000
                latencies.append((now - after["written"]) / 1e6)
                if arrivals is not None:
                    arrivals.event[event["source"]["ts_us"]] = now
        msg = consumer.poll(0)
    return n


def _poll_raw(consumer: Consumer, arrivals: _Arrivals) -> None:
    """Read what is there of the raw topic: when each measured write's first copy came."""
    msg = consumer.poll(0)
    while msg is not None:
        value = msg.value()
        # a RowUpdate (a heartbeat's first byte is 0, not the version)
        if msg.error() is None and value and value[:1] == VERSION_BYTE:
            written = mutation_time_of_value(value)
            if written >= arrivals.since_us:
                arrivals.raw.setdefault(written, time.time_ns() // 1000)
        msg = consumer.poll(0)
