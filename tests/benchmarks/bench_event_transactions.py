"""Kafka's own floor for the job's event side over many tables: the job's transactional
producer (`materializer.kafka.transactions.PartitionTransaction`, its settings) writing
events of T tables, each table's topic of P partitions, one producer per raw partition
(EVTX_RAW, 4) and a transaction each per micro-batch, and nothing else: no Spark, no
merge. What it costs the broker is what the job's exactly-once delivery costs it at best.

Two shapes, each at every count of EVTX_TABLES (1,100,1000) and EVTX_PARTITIONS (1,6):
- paced: EVTX_RATE changes/s (200) for EVTX_SECONDS (20), a transaction per producer each
  second (the job's 1-s trigger): the latency benchmark's load;
- backlog: EVTX_CHANGES changes (120,000) in two rounds of a transaction per producer (the
  job's 200,000 copies a micro-batch: a backlog at start).

Printed per run: the broker's CPU per change (its idle use, measured first, taken off) and
the producing process's (the loop and librdkafka's threads, as in a job's Python worker),
requests by kind (the producers' own counts: Produce, AddPartitionsToTxn, EndTxn, Metadata),
produce batches and records per batch, the event partitions a transaction touched (each
costs the broker a batch and a transaction marker), commit times, the first round against
the median. Ratios are to the first table count of the same shape and partitions, in the
same run.

`.venv/bin/python -m pytest tests/benchmarks/bench_event_transactions.py -s -o
python_files='bench_*.py' -o python_functions='test_bench_*'`
"""

from __future__ import annotations

import json
import os
import random
import resource
import statistics
import time
import uuid
from dataclasses import dataclass, field

from confluent_kafka.admin import AdminClient
from cpu_use import process_cpu_s

from devstack import kafka
from materializer.kafka.transactions import PartitionTransaction
from shared.kafka_topics import TopicCreator

TABLES = [int(n) for n in os.environ.get("EVTX_TABLES", "1,100,1000").split(",")]
PARTITIONS = [int(n) for n in os.environ.get("EVTX_PARTITIONS", "1,6").split(",")]
SHAPES = os.environ.get("EVTX_SHAPES", "paced,backlog").split(",")
RAW = int(os.environ.get("EVTX_RAW", "4"))
RATE = int(os.environ.get("EVTX_RATE", "200"))
SECONDS = int(os.environ.get("EVTX_SECONDS", "20"))
CHANGES = int(os.environ.get("EVTX_CHANGES", "120000"))
VALUE = os.urandom(150).hex().encode()  # about a 5-column row's JSON event
KINDS = ("Produce", "AddPartitionsToTxn", "EndTxn", "Metadata")


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


def _run(bootstrap: str, broker_pid: int, idle_cores: float, shape: str, tables: int,
         partitions: int, seconds: int = SECONDS) -> tuple[float, str]:
    """One run: the broker's µs per change (idle taken off) and its line."""
    prefix = f"evtx{uuid.uuid4().hex[:6]}"
    topics = [f"{prefix}.ks.t{i}" for i in range(tables)]
    # (deleted at the run's end: its files at once, not a minute later amid the next run)
    TopicCreator(bootstrap, partitions, 1, 300).ensure_many(topics,
                                                      config={"file.delete.delay.ms": "0"})
    _quiet(broker_pid)  # the broker goes on working on new topics a while after they exist
    stats = _Stats()
    # (librdkafka queues each statistics report until a poll: the loop below polls)
    conf = {"bootstrap.servers": bootstrap, "statistics.interval.ms": 1000,
            "stats_cb": stats.on_stats}
    cpu0, wall0, own0 = process_cpu_s(broker_pid), time.monotonic(), _own_cpu_s()
    producers = [PartitionTransaction(conf, f"{prefix}-{raw}") for raw in range(RAW)]
    rng = random.Random(7)
    written, touched, commits, rounds = 0, [], [], []

    def transaction(txn: PartitionTransaction, count: int) -> None:
        nonlocal written
        seen = set()
        for _ in range(count):
            table = written % tables
            txn.produce(topics[table], b"%d" % rng.randrange(10**9), VALUE)
            seen.add(table)
            written += 1
            if written % 1000 == 0:
                txn._producer.poll(0)  # the statistics reports (a benchmark's peek)
        started = time.monotonic()
        txn.commit()
        commits.append(time.monotonic() - started)
        touched.append(len(seen) * partitions if count >= partitions * len(seen)
                       else min(count, len(seen) * partitions))

    if shape == "paced":
        for _ in range(seconds):
            started = time.monotonic()
            for txn in producers:
                transaction(txn, RATE // RAW)
            rounds.append(time.monotonic() - started)
            time.sleep(max(0.0, 1 - rounds[-1]))
    else:
        for _ in range(2):
            started = time.monotonic()
            for txn in producers:
                transaction(txn, CHANGES // RAW // 2)
            rounds.append(time.monotonic() - started)
    wall = time.monotonic() - wall0
    time.sleep(1.1)  # a last statistics window
    for txn in producers:
        txn._producer.poll(0.2)
        txn.close()
    busy = process_cpu_s(broker_pid) - cpu0 - idle_cores * wall
    own = _own_cpu_s() - own0  # the producing loop and librdkafka's threads
    # a thousand topics a run left behind would fill the broker's heap in a few runs; their
    # deletion keeps the broker busy a while, so the next run waits until it is quiet
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.delete_topics(topics, operation_timeout=60).values():
        future.result(120)
    _quiet(broker_pid)
    per_change = busy / written * 1e6
    commits.sort()
    line = (f"{shape}, {tables} table(s) x {partitions} partition(s): {written:,} changes "
            f"in {len(commits)} transactions, {wall:.1f}s; broker {per_change:,.1f} µs a "
            f"change, the producers' process {own / written * 1e6:,.1f}; "
            f"{statistics.mean(touched):,.0f} event partitions a transaction (at most); "
            f"{stats.batches:,} batches, {stats.records / max(1, stats.batches):.1f} "
            f"records a batch; requests " + ", ".join(f"{k} {stats.total(k):,}"
                                                      for k in KINDS)
            + f"; commit p50 {commits[len(commits) // 2] * 1000:.0f} ms, max "
              f"{commits[-1] * 1000:.0f} ms; first round {rounds[0]:.2f}s, median "
              f"{statistics.median(rounds):.2f}s")
    assert written == (RATE // RAW * RAW * seconds if shape == "paced" else CHANGES // RAW // 2
                       * RAW * 2)
    assert stats.total("EndTxn") == len(commits)  # librdkafka saw every commit
    return per_change, line


def _own_cpu_s() -> float:
    """CPU seconds this process has used, every thread (librdkafka's too)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _quiet(broker_pid: int, cores: float = 0.06, within_s: float = 120) -> float:
    """Wait until the broker uses under `cores` over 3 s (or `within_s` passed); its use
    over the last 3 s."""
    deadline = time.monotonic() + within_s
    while True:
        before = process_cpu_s(broker_pid)
        time.sleep(3)
        used = (process_cpu_s(broker_pid) - before) / 3
        if used < cores or time.monotonic() > deadline:
            return used


def test_bench_event_transactions(stack) -> None:
    """The broker's cost per change of the job's transactions, by tables and partitions."""
    broker = kafka.running_pid(stack)
    assert broker is not None, "the stack's broker is not running"
    # a fresh broker's first transactions and topics cost it more (its JIT, new segments):
    # a run at the largest count of each shape first, not printed
    for shape in SHAPES:
        _run(stack.bootstrap_servers, broker, 0.0, shape, max(TABLES), 1, seconds=5)
    _quiet(broker)
    before = process_cpu_s(broker)
    time.sleep(10)
    idle = (process_cpu_s(broker) - before) / 10
    print(f"\nbroker idle: {idle:.3f} cores (taken off each run's CPU); {RAW} producers "
          f"(raw partitions), each change one event")
    for shape in SHAPES:
        for parts in PARTITIONS:
            first: float | None = None
            for count in TABLES:
                cost, line = _run(stack.bootstrap_servers, broker, idle, shape, count, parts)
                if first is None:
                    first = cost
                elif first > 1:  # (a backlog into one partition costs it next to nothing)
                    line += f"; {cost / first:.1f}x the broker's cost at {TABLES[0]} table(s)"
                print(line)
