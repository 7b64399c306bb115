"""Kafka's own floor for the job's event side: the job's transactional producer
(`materializer.kafka.transactions.PartitionTransaction`, its settings), one per raw
partition, writing one event per change round-robin over a load's tables, a transaction
each per micro-batch, and nothing else (no Spark, no merge). What that costs the broker is
what the job's exactly-once delivery costs it at best. The same loop with Kafka's Java
producer (java/TxnFloor.java, the same settings where Java has them) shows what Java's
client, which puts every partition bound for a broker in one produce request where
librdkafka sends a request per partition, would save the broker. Used by bench_event_transactions
(the floor by tables and partitions) and bench_end_to_end (the floor of its latency runs'
load, in the same run).
"""

from __future__ import annotations

import json
import os
import random
import resource
import statistics
import subprocess
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka.admin import AdminClient
from cpu_use import process_cpu_s

from materializer.kafka.transactions import PartitionTransaction
from shared.kafka_topics import TopicCreator

VALUE = os.urandom(150).hex().encode()  # about a 5-column row's JSON event
JAVA_PROGRAM = Path(__file__).parent / "java" / "TxnFloor.java"
KINDS = ("Produce", "AddPartitionsToTxn", "EndTxn", "Metadata")


@dataclass(frozen=True)
class Load:
    """What the producers write: `paced`, `rate` changes/s for `seconds` with a
    transaction per producer each second (the job's 1-s trigger); or `backlog`, `changes`
    changes in two rounds of a transaction per producer (a micro-batch from a backlog)."""

    shape: str
    tables: int
    partitions: int = 1  # of each table's topic
    raw: int = 4  # producers: the raw partitions
    rate: int = 200
    seconds: int = 20
    changes: int = 120_000

    def per_transaction(self) -> int:
        """Changes in each producer's transaction."""
        if self.shape == "paced":
            return self.rate // self.raw
        return self.changes // self.raw // 2

    def rounds(self) -> int:
        """Rounds of a transaction per producer."""
        return self.seconds if self.shape == "paced" else 2


@dataclass(frozen=True)
class FloorRun:
    """One run's figures: the broker's CPU a change (its idle use taken off) and the line
    to print."""

    per_change_us: float
    line: str


@dataclass
class _Stats:
    """What librdkafka's statistics say of the producers, summed."""

    # (client, broker, kind) -> requests so far (librdkafka's totals)
    requests: dict[tuple[str, str, str], int] = field(default_factory=dict)
    batches: int = 0
    records: int = 0

    def on_stats(self, payload: str) -> None:
        """librdkafka's stats_cb: request counts are totals, batch histograms per window."""
        stats = json.loads(payload)
        for name, broker in stats["brokers"].items():
            for kind, count in broker.get("req", {}).items():
                self.requests[(stats["name"], name, kind)] = count
        for topic in stats["topics"].values():
            self.batches += topic["batchcnt"]["cnt"]
            self.records += topic["batchcnt"]["sum"]

    def total(self, kind: str) -> int:
        """Requests of `kind` over every producer and broker."""
        return sum(n for (_client, _broker, k), n in self.requests.items() if k == kind)


@dataclass
class _Written:
    """What one client's producing loop did: changes, commit and round times, the event
    partitions each transaction touched (at most), and its request counts as text."""

    changes: int = 0
    commits: list[float] = field(default_factory=list)
    rounds: list[float] = field(default_factory=list)
    touched: list[int] = field(default_factory=list)
    requests: str = ""


def run(bootstrap: str, broker_pid: int, idle_cores: float, load: Load,
        client: str = "librdkafka", kafka_jars: Path | None = None) -> FloorRun:
    """Write `load` into new topics (deleted at the end) and measure the broker: with the
    job's own producer (`client` "librdkafka"), or Kafka's Java producer ("java", from
    `kafka_jars`, java/TxnFloor.java)."""
    prefix = f"evtx{uuid.uuid4().hex[:6]}"
    topics = [f"{prefix}.ks.t{i}" for i in range(load.tables)]
    # (deleted at the run's end: its files at once, not a minute later amid the next run)
    TopicCreator(bootstrap, load.partitions, 1, 300).ensure_many(
        topics, config={"file.delete.delay.ms": "0"})
    quiet(broker_pid)  # the broker goes on working on new topics a while after they exist
    # the producers' CPU: this process's (the loop and librdkafka's threads) or the JVM's
    cpu0, wall0 = process_cpu_s(broker_pid), time.monotonic()
    own0 = process_cpu_s(os.getpid()) + _children_cpu_s()
    if client == "java":
        assert kafka_jars is not None, "the Java client needs Kafka's jars"
        done = _write_java(bootstrap, prefix, topics, load, kafka_jars)
    else:
        done = _write_librdkafka(bootstrap, prefix, topics, load)
    wall = time.monotonic() - wall0
    busy = process_cpu_s(broker_pid) - cpu0 - idle_cores * wall
    own = process_cpu_s(os.getpid()) + _children_cpu_s() - own0
    # a thousand topics a run left behind would fill the broker's heap in a few runs; their
    # deletion keeps the broker busy a while, so the next run waits until it is quiet
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.delete_topics(topics, operation_timeout=60).values():
        future.result(120)
    quiet(broker_pid)
    written, commits, rounds = done.changes, sorted(done.commits), done.rounds
    per_change = busy / written * 1e6
    touched = (f"{statistics.mean(done.touched):,.0f} event partitions a transaction (at "
               "most); " if done.touched else "")
    line = (f"{load.shape}, {load.tables} table(s) x {load.partitions} partition(s), "
            f"{client}: {written:,} changes in {len(commits)} transactions, {wall:.1f}s; "
            f"broker {per_change:,.1f} µs a change ({busy / wall:.2f} cores above its idle "
            f"{idle_cores:.2f}), the producers' process {own / written * 1e6:,.1f}; "
            f"{touched}{done.requests}; commit p50 {commits[len(commits) // 2] * 1000:.0f} "
            f"ms, max {commits[-1] * 1000:.0f} ms; first round {rounds[0]:.2f}s, median "
            f"{statistics.median(rounds):.2f}s")
    assert written == load.per_transaction() * load.raw * load.rounds()
    assert len(commits) == load.raw * load.rounds()
    return FloorRun(per_change, line)


def _write_librdkafka(bootstrap: str, prefix: str, topics: list[str], load: Load
                      ) -> _Written:
    """The job's transactional producers write `load`."""
    stats = _Stats()
    # (librdkafka queues each statistics report until a poll: the loop below polls)
    conf = {"bootstrap.servers": bootstrap, "statistics.interval.ms": 1000,
            "stats_cb": stats.on_stats}
    producers = [PartitionTransaction(conf, f"{prefix}-{raw}") for raw in range(load.raw)]
    rng = random.Random(7)
    done = _Written()

    def transaction(txn: PartitionTransaction, count: int) -> None:
        seen = set()
        for _ in range(count):
            table = done.changes % load.tables
            txn.produce(topics[table], b"%d" % rng.randrange(10**9), VALUE)
            seen.add(table)
            done.changes += 1
            if done.changes % 1000 == 0:
                txn._producer.poll(0)  # the statistics reports (a benchmark's peek)
        started = time.monotonic()
        txn.commit()
        done.commits.append(time.monotonic() - started)
        done.touched.append(min(count, len(seen) * load.partitions))

    for _ in range(load.rounds()):
        started = time.monotonic()
        for txn in producers:
            transaction(txn, load.per_transaction())
        done.rounds.append(time.monotonic() - started)
        if load.shape == "paced":
            time.sleep(max(0.0, 1 - done.rounds[-1]))
    time.sleep(1.1)  # a last statistics window
    for txn in producers:
        txn._producer.poll(0.2)
        txn.close()
    assert stats.total("EndTxn") == len(done.commits)  # librdkafka saw every commit
    done.requests = (f"{stats.batches:,} batches, "
                     f"{stats.records / max(1, stats.batches):.1f} records a batch; "
                     "requests " + ", ".join(f"{k} {stats.total(k):,}" for k in KINDS))
    return done


def _write_java(bootstrap: str, prefix: str, topics: list[str], load: Load,
                kafka_jars: Path) -> _Written:
    """Kafka's Java producers write `load` (java/TxnFloor.java, a JVM of its own)."""
    from devstack.artifacts import find_java

    cmd = [str(find_java()), "-cp", f"{kafka_jars}/*", str(JAVA_PROGRAM), bootstrap, prefix,
           str(load.raw), str(load.per_transaction()), str(load.rounds()),
           "1" if load.shape == "paced" else "0", VALUE.decode()]
    out = subprocess.run(cmd, input="\n".join(topics), capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    version = ("transactions v2: no AddPartitionsToTxn" if got["transaction_v2"]
               else "transactions v1")
    return _Written(got["written"], got["commits"], got["rounds"], requests=(
        f"requests {got['requests']:,} of every kind, about {got['produce_requests']:,} "
        f"produce requests (records sent over records a request); {version}"))


def _children_cpu_s() -> float:
    """The CPU seconds of this process's children that have ended (the JVM)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def quiet(broker_pid: int, cores: float = 0.06, within_s: float = 120) -> float:
    """Wait until the broker uses under `cores` over 3 s (or `within_s` passed); its use
    over the last 3 s."""
    deadline = time.monotonic() + within_s
    while True:
        before = process_cpu_s(broker_pid)
        time.sleep(3)
        used = (process_cpu_s(broker_pid) - before) / 3
        if used < cores or time.monotonic() > deadline:
            return used


def idle_cores(broker_pid: int, seconds: float = 10) -> float:
    """The broker's cores over `seconds`, once it is quiet: what each run takes off."""
    quiet(broker_pid)
    before = process_cpu_s(broker_pid)
    time.sleep(seconds)
    return (process_cpu_s(broker_pid) - before) / seconds
