"""The floors under the job at RF=3: the job's own Kafka source and sink around the least
a query must do per change, beside the job itself.

Same synthetic input as bench_rf3 (rf3_copies: each change three times, shuffled). Runs
one query after the other on the same broker, local[2] by default (JVM_FLOOR_CORES), so the
figures compare; JVM_FLOOR_RUNS lists query:dedupe-window-s pairs (spark.dedupe_window_s,
0: the copy dedupe off; the job's partition stores use it, the floors ignore it: the job no longer
drops copies before them, and arrow-floor drops every copy it has seen):
- "kafka-floor": source and sink; every copy goes straight through to its table's floor
  topic (raw_workload.floor_topic of its key's table id), no state;
- "kafka-floor-one": the same into one output topic, <prefix>.floor.all (the sink's share);
- "jvm-floor": a JVM operator that does the least a merge must (jvm_floor/CopyFloor.java:
  per key, state read once and written once per micro-batch, one output per input; no
  decoding, no merge) over a shuffle and Spark's RocksDB state store;
- "arrow-floor": the floor of the job's own design, without shuffles or Spark state: the
  raw topic is keyed by table id and partition key, so every copy of a key is in one Kafka
  partition, read by one task; a mapInArrow over the source drops copies by digest and
  reads and writes each key's last value in a RocksDB (rocksdict) per Kafka partition, one
  output per change. What it leaves out: making that state consistent with Spark's checkpoint
  (replayed batches) and with task placement on a cluster;
- "partition": that design as built, the job (materializer.spark.partition_job: partition
  stores, rollback on replay, expiry index, copy window).
The floors are jvm_floors' queries, the runs spark_runs'. A query name with "+kafka" runs
with the Kafka client settings in BENCH_KAFKA_TUNED (comma-separated c:name=value for the
source's consumer, p:name=value for the sink's producer).
What it answers for issue 14: how many logical changes per core Spark itself leaves room
for, i.e. what a JVM-side merge could reach at best, and where the job's cost goes. Also
printed: the Kafka broker's share of the busy CPU.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

from cpu_use import machine_busy_s, process_cpu_s
from jvm_floors import build_jar
from raw_workload import TABLE, floor_topic
from rf3_copies import CHANGES, KEYS, PER_BATCH, publish_rf3
from spark_runs import breakdown, run_job

from devstack import kafka
from shared.kafka_topics import TopicCreator, read_to_end

CORES = int(os.environ.get("JVM_FLOOR_CORES", "2"))
# (query, copy dedupe window in s; 0: off)
DEFAULT_RUNS = "kafka-floor:0,jvm-floor:0,arrow-floor:0,partition:120"
RUNS = [(api, int(window)) for api, window in (
    r.split(":") for r in os.environ.get("JVM_FLOOR_RUNS", DEFAULT_RUNS).split(","))]


def test_bench_jvm_floor_rf3(stack, tmp_path: Path, monkeypatch) -> None:
    """Logical changes/s per core: the floors, then the job, same input shape."""
    monkeypatch.setenv("BENCH_EXTRA_CP", str(build_jar(tmp_path / "jar")))
    changes = (CHANGES // KEYS) * KEYS
    broker = kafka.running_pid(stack)
    assert broker is not None, "the stack's Kafka is not running"
    for api, window in RUNS:
        prefix = f"floor{uuid.uuid4().hex[:6]}"
        copies_sent = publish_rf3(stack.bootstrap_servers, prefix)
        assert copies_sent == 3 * changes
        # the floors' output (the broker makes no topic on a write)
        TopicCreator(stack.bootstrap_servers, 2, 1).ensure(floor_topic(prefix, TABLE.id.bytes))
        details: list = []
        observed: list = []
        python_cpu: list = []
        busy, broker_cpu = machine_busy_s(), process_cpu_s(broker)
        progress = run_job(stack, api, CORES, prefix, tmp_path / f"ckpt-{prefix}", PER_BATCH,
                           dedupe_s=window, details=details, observed=observed,
                           python_cpu=python_cpu)
        assert sum(n for n, _ in progress) == copies_sent
        busy, broker_cpu = machine_busy_s() - busy, process_cpu_s(broker) - broker_cpu
        first, steady = progress[0], progress[1:]
        rows = sum(n for n, _ in steady)
        secs = sum(ms for _, ms in steady) / 1000
        logical = rows / 3  # changes; every change arrives as three copies
        label = api.replace("partition", "the job (partition stores)")
        print(f"\n{label}, RF=3 synthetic, dedupe window {window} s, local[{CORES}]: "
              f"first batch {first[0]:,} copies in {first[1] / 1000:.1f}s; steady "
              f"{rows:,} copies in {secs:.1f}s = {logical / secs:,.0f} changes/s "
              f"({logical / secs / CORES:,.0f} per core), {rows / secs / CORES:,.0f} copies/s "
              f"per core")
        print(breakdown(details[1:], CORES, logical))
        print(f"  the whole run (start-up included): {busy:.1f} core-s busy, of it the Kafka "
              f"broker {broker_cpu:.1f} core-s ({broker_cpu / busy:.0%})")
        if api.startswith("partition"):  # the Python workers' own CPU (/proc)
            to_python = sum(o["partition_state"]["copies_in"] for o in observed)
            print(f"  Python workers (the whole run, start included): "
                  f"{python_cpu[0] * 1e6 / changes:.0f} us per change; the JVM, scheduling "
                  f"and waits: the rest; copies that reached Python: {to_python:,} of "
                  f"{copies_sent:,}")
        if api.split("+")[0] == "partition":  # the job: one event per change
            events = sum(1 for _ in read_to_end(stack.bootstrap_servers, f"{prefix}.bench.t"))
            assert events == changes, (api, events, changes)
