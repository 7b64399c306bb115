"""Kafka's own floor for the job's event side over many tables: the job's transactional
producer (`materializer.kafka.transactions.PartitionTransaction`, its settings) writing
events of T tables, each table's topic of P partitions, one producer per raw partition
(EVTX_RAW, 4) and a transaction each per micro-batch, and nothing else: no Spark, no
merge. What it costs the broker is what the job's exactly-once delivery costs it at best.

Each run with both clients of EVTX_CLIENTS (librdkafka,java): the job's, and Kafka's Java
producer in a JVM of its own (java/TxnFloor.java, the same loop and settings), which puts
every partition bound for a broker in one produce request where librdkafka sends one per
partition. Two shapes, each at every count of EVTX_TABLES (1,100,1000) and EVTX_PARTITIONS (1,6):
- paced: EVTX_RATE changes/s (200) for EVTX_SECONDS (20), a transaction per producer each
  second (the job's 1-s trigger): the latency benchmark's load;
- backlog: EVTX_CHANGES changes (120,000) in two rounds of a transaction per producer (the
  job's 200,000 copies a micro-batch: a backlog at start).

Printed per run: the broker's CPU per change (its idle use, measured first, taken off) and
the producing process's (the loop and librdkafka's threads, as in a job's Python worker),
requests by kind (the producers' own counts: Produce, AddPartitionsToTxn, EndTxn, Metadata),
produce batches and records per batch, the event partitions a transaction touched (each
costs the broker a batch and a transaction marker), commit times, the first round against
the median. Ratios are to the first table count of the same shape, partitions and client, in
the same run.

`.venv/bin/python -m pytest tests/benchmarks/bench_event_transactions.py -s -o
python_files='bench_*.py' -o python_functions='test_bench_*'`
"""

from __future__ import annotations

import os

from event_floor import Load, idle_cores, run

from devstack import kafka
from devstack.artifacts import lib_dir

TABLES = [int(n) for n in os.environ.get("EVTX_TABLES", "1,100,1000").split(",")]
PARTITIONS = [int(n) for n in os.environ.get("EVTX_PARTITIONS", "1,6").split(",")]
SHAPES = os.environ.get("EVTX_SHAPES", "paced,backlog").split(",")
CLIENTS = os.environ.get("EVTX_CLIENTS", "librdkafka,java").split(",")
RAW = int(os.environ.get("EVTX_RAW", "4"))
RATE = int(os.environ.get("EVTX_RATE", "200"))
SECONDS = int(os.environ.get("EVTX_SECONDS", "20"))
CHANGES = int(os.environ.get("EVTX_CHANGES", "120000"))


def test_bench_event_transactions(stack) -> None:
    """The broker's cost per change of the job's transactions, by tables and partitions."""
    jars = lib_dir(stack.lib_dir, "kafka")
    broker = kafka.running_pid(stack)
    assert broker is not None, "the stack's broker is not running"
    # a fresh broker's first transactions and topics cost it more (its JIT, new segments):
    # a run at the largest count of each shape first, not printed
    for shape in SHAPES:
        for client in CLIENTS:
            run(stack.bootstrap_servers, broker, 0.0, _load(shape, max(TABLES), 1, seconds=5),
                client, jars)
    idle = idle_cores(broker)
    print(f"\nbroker idle: {idle:.3f} cores (taken off each run's CPU); {RAW} producers "
          f"(raw partitions), each change one event")
    for shape in SHAPES:
        for parts in PARTITIONS:
            first: dict[str, float] = {}
            for count in TABLES:
                for client in CLIENTS:
                    floor = run(stack.bootstrap_servers, broker, idle,
                                _load(shape, count, parts), client, jars)
                    line = floor.line
                    if client not in first:
                        first[client] = floor.per_change_us
                    elif first[client] > 1:  # (a backlog into one partition: next to nothing)
                        line += (f"; {floor.per_change_us / first[client]:.1f}x the broker's "
                                 f"cost at {TABLES[0]} table(s)")
                    print(line)


def _load(shape: str, tables: int, partitions: int, seconds: int = SECONDS) -> Load:
    """The environment's load of `shape` over `tables` topics of `partitions`."""
    return Load(shape, tables, partitions, RAW, RATE, seconds, CHANGES)
