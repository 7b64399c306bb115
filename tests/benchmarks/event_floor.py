"""Kafka's own floor for the job's event side: the job's transactional producer
(`materializer.kafka.transactions.PartitionTransaction`, its settings), one per raw
partition, writing one event per change round-robin over a load's tables, a transaction
each per micro-batch, and nothing else (no Spark, no merge). What that costs the broker is
what the job's exactly-once delivery costs it at best. Used by bench_event_transactions
(the floor by tables and partitions) and bench_end_to_end (the floor of its latency runs'
load, in the same run).
"""

from __future__ import annotations

import json
import os
import random
import statistics
import time
import uuid
from dataclasses import dataclass, field

from confluent_kafka.admin import AdminClient
from cpu_use import process_cpu_s

from materializer.kafka.transactions import PartitionTransaction
from shared.kafka_topics import TopicCreator

VALUE = os.urandom(150).hex().encode()  # about a 5-column row's JSON event
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


def run(bootstrap: str, broker_pid: int, idle_cores: float, load: Load) -> FloorRun:
    """Write `load` into new topics (deleted at the end) and measure the broker."""
    prefix = f"evtx{uuid.uuid4().hex[:6]}"
    topics = [f"{prefix}.ks.t{i}" for i in range(load.tables)]
    # (deleted at the run's end: its files at once, not a minute later amid the next run)
    TopicCreator(bootstrap, load.partitions, 1, 300).ensure_many(
        topics, config={"file.delete.delay.ms": "0"})
    quiet(broker_pid)  # the broker goes on working on new topics a while after they exist
    stats = _Stats()
    # (librdkafka queues each statistics report until a poll: the loop below polls)
    conf = {"bootstrap.servers": bootstrap, "statistics.interval.ms": 1000,
            "stats_cb": stats.on_stats}
    # this process's CPU: the producing loop and librdkafka's threads
    cpu0, wall0, own0 = process_cpu_s(broker_pid), time.monotonic(), process_cpu_s(os.getpid())
    producers = [PartitionTransaction(conf, f"{prefix}-{raw}") for raw in range(load.raw)]
    rng = random.Random(7)
    written, touched, commits, rounds = 0, [], [], []

    def transaction(txn: PartitionTransaction, count: int) -> None:
        nonlocal written
        seen = set()
        for _ in range(count):
            table = written % load.tables
            txn.produce(topics[table], b"%d" % rng.randrange(10**9), VALUE)
            seen.add(table)
            written += 1
            if written % 1000 == 0:
                txn._producer.poll(0)  # the statistics reports (a benchmark's peek)
        started = time.monotonic()
        txn.commit()
        commits.append(time.monotonic() - started)
        touched.append(min(count, len(seen) * load.partitions))

    for _ in range(load.rounds()):
        started = time.monotonic()
        for txn in producers:
            transaction(txn, load.per_transaction())
        rounds.append(time.monotonic() - started)
        if load.shape == "paced":
            time.sleep(max(0.0, 1 - rounds[-1]))
    wall = time.monotonic() - wall0
    time.sleep(1.1)  # a last statistics window
    for txn in producers:
        txn._producer.poll(0.2)
        txn.close()
    busy = process_cpu_s(broker_pid) - cpu0 - idle_cores * wall
    own = process_cpu_s(os.getpid()) - own0
    # a thousand topics a run left behind would fill the broker's heap in a few runs; their
    # deletion keeps the broker busy a while, so the next run waits until it is quiet
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.delete_topics(topics, operation_timeout=60).values():
        future.result(120)
    quiet(broker_pid)
    per_change = busy / written * 1e6
    commits.sort()
    line = (f"{load.shape}, {load.tables} table(s) x {load.partitions} partition(s): "
            f"{written:,} changes in {len(commits)} transactions, {wall:.1f}s; broker "
            f"{per_change:,.1f} µs a change ({busy / wall:.2f} cores above its idle "
            f"{idle_cores:.2f}), the producers' process {own / written * 1e6:,.1f}; "
            f"{statistics.mean(touched):,.0f} event partitions a transaction (at most); "
            f"{stats.batches:,} batches, {stats.records / max(1, stats.batches):.1f} "
            f"records a batch; requests " + ", ".join(f"{k} {stats.total(k):,}"
                                                      for k in KINDS)
            + f"; commit p50 {commits[len(commits) // 2] * 1000:.0f} ms, max "
              f"{commits[-1] * 1000:.0f} ms; first round {rounds[0]:.2f}s, median "
              f"{statistics.median(rounds):.2f}s")
    assert written == load.per_transaction() * load.raw * load.rounds()
    assert stats.total("EndTxn") == len(commits)  # librdkafka saw every commit
    return FloorRun(per_change, line)


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
