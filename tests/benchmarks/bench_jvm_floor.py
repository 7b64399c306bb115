"""The floors under the job at RF=3: the job's own Kafka source and sink around the least
a query must do per change, beside the job itself.

Same synthetic input as bench_rf3 (each change three times, shuffled). Runs one query
after the other on the same broker, local[2] by default (JVM_FLOOR_CORES), so the figures
compare; JVM_FLOOR_RUNS lists query:dedupe-window-s pairs (spark.dedupe_window_s, 0: the
copy dedupe off; the job's partition stores use it, the floors ignore it: the job no longer
drops copies before them, and arrow-floor drops every copy it has seen):
- "kafka-floor": source and sink; every copy goes straight through, no state;
- "kafka-floor-one": the same into one output topic, <prefix>.floor.all (the sink's share);
- "jvm-floor": a JVM operator that does the least a merge must (jvm_floor/CopyFloor.java:
  per key, state read once and written once per micro-batch, one output per input; no
  decoding, no merge) over a shuffle and Spark's RocksDB state store;
- "arrow-floor": the floor of the job's own design, without shuffles or Spark state: raw
  topics are keyed by partition key, so every copy of a key is in one Kafka partition, read
  by one task; a mapInArrow over the source drops copies by digest and reads and writes
  each key's last value in a RocksDB (rocksdict) per Kafka partition, one output per
  change. What it leaves out: making that state consistent with Spark's checkpoint
  (replayed batches) and with task placement on a cluster;
- "partition": that design as built, the job (materializer.spark.partition_job: partition
  stores, rollback on replay, expiry index, copy window).
A query name with "+kafka" runs with the Kafka client settings in BENCH_KAFKA_TUNED
(comma-separated c:name=value for the source's consumer, p:name=value for the sink's
producer).
What it answers for issue 14: how many logical changes per core Spark itself leaves room
for, i.e. what a JVM-side merge could reach at best, and where the job's cost goes. Also
printed: the Kafka broker's share of the busy CPU.
"""

from __future__ import annotations

import os
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pyspark
from bench_materializer import _run_job
from bench_rf3 import CHANGES, KEYS, PER_BATCH, breakdown, publish_rf3
from cpu_use import machine_busy_s, process_cpu_s

from devstack import kafka
from materializer.settings import MaterializerConfig
from materializer.spark import job
from shared.kafka_topics import TopicCreator, read_to_end

HERE = Path(__file__).parent / "jvm_floor"
CORES = int(os.environ.get("JVM_FLOOR_CORES", "2"))
# (query, copy dedupe window in s; 0: off)
DEFAULT_RUNS = "kafka-floor:0,jvm-floor:0,arrow-floor:0,partition:120"
# the floors' output: what the job writes to its event topics
FLOOR_SCHEMA = "topic STRING, key BINARY, value BINARY"
RUNS = [(api, int(window)) for api, window in (
    r.split(":") for r in os.environ.get("JVM_FLOOR_RUNS", DEFAULT_RUNS).split(","))]


def build_jar(out: Path) -> Path:
    """Compile CopyFloor.java against pyspark's jars: the jar's path."""
    classes = out / "classes"
    classes.mkdir(parents=True, exist_ok=True)
    cp = str(Path(pyspark.__file__).parent / "jars" / "*")
    subprocess.run(["javac", "-nowarn", "-d", str(classes), "-cp", cp,
                    str(HERE / "CopyFloor.java")], check=True, capture_output=True, text=True)
    jar = out / "copy-floor.jar"
    subprocess.run(["jar", "cf", str(jar), "-C", str(classes), "."], check=True)
    return jar


def _first_copy(dbs: dict, state_dir: str, topic: str, part: int, value: bytes) -> object:
    """The rocksdict of `topic`'s Kafka partition `part` (opened on first use) if `value`
    is the first copy of its record seen there (its copy key recorded now), else None. The
    copy keys are never dropped here: a bench of a few minutes, not a window."""
    from rocksdict import Rdict

    from shared.rowupdate import DIGEST_SIZE

    db = dbs.get((topic, part))
    if db is None:
        db = dbs[(topic, part)] = Rdict(f"{state_dir}/{topic}-{part}")
    copy = b"c" + value[1:1 + 2 * DIGEST_SIZE]
    if db.get(copy) is not None:
        return None
    db[copy] = b""
    return db


def _arrow_out(rows: list[tuple[str, bytes | None, bytes | None]]) -> object:
    """(topic, key, value) rows as one Arrow batch of FLOOR_SCHEMA (typed even if empty)."""
    import pyarrow as pa

    return pa.RecordBatch.from_pydict(
        {"topic": [t for t, _, _ in rows], "key": [k for _, k, _ in rows],
         "value": [v for _, _, v in rows]},
        schema=pa.schema([("topic", pa.string()), ("key", pa.binary()),
                          ("value", pa.binary())]))


def arrow_floor(state_dir: str) -> object:
    """mapInArrow function of "arrow-floor": per Kafka partition a rocksdict holding each
    copy digest seen and each key's last value; a copy seen before is dropped, every other
    record goes out as (its key's last value + its value), like CopyFloor's output."""
    def run(batches: Iterator) -> Iterator:
        dbs: dict = {}
        try:
            for batch in batches:
                cols = batch.to_pydict()
                out = []
                for topic, pk, value, part in zip(cols["topic"], cols["key"], cols["value"],
                                                  cols["partition"], strict=True):
                    db = _first_copy(dbs, state_dir, topic, part, value)
                    if db is None:
                        continue
                    last = db.get(pk) or b""
                    db[pk] = value
                    out.append((topic.replace(".raw.", ".floor."), pk, last + value))
                yield _arrow_out(out)
        finally:
            for db in dbs.values():
                db.close()
    return run


def start_floor(spark: object, cfg: MaterializerConfig, api: str) -> object:
    """The job's query (job.read_raw → … → job.write_events) with CopyFloor in place of the
    partition stores ("jvm-floor"), with a mapInArrow and rocksdict ("arrow-floor"), or
    with nothing between ("kafka-floor": every raw record goes straight to the output
    topic, no state of its own; "kafka-floor-one": the same into one output topic,
    <prefix>.floor.all)."""
    from pyspark.sql import DataFrame
    from pyspark.sql import functions as F

    raw = job.read_raw(spark, cfg)
    if api == "arrow-floor":
        state_dir = Path(cfg.spark.checkpoint) / "rocksdict"
        state_dir.mkdir(parents=True, exist_ok=True)
        out = raw.mapInArrow(arrow_floor(str(state_dir)), FLOOR_SCHEMA)
    elif api == "kafka-floor":
        out = raw.select(F.regexp_replace("topic", r"\.raw\.", ".floor.").alias("topic"),
                         "key", "value")
    elif api == "kafka-floor-one":  # the same, every record into one topic: the sink's share
        out = raw.select(F.lit(f"{cfg.kafka.topic_prefix}.floor.all").alias("topic"), "key",
                         "value")
    elif api == "jvm-floor":
        jvm = spark.sparkContext._jvm  # type: ignore[attr-defined]
        out = DataFrame(jvm.casscade.bench.CopyFloor.apply(raw._jdf), spark)
    else:
        raise ValueError(f"no floor query {api!r}")
    return job.write_events(out, cfg, available_now=True)


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
        TopicCreator(stack.bootstrap_servers, 2, 1).ensure(f"{prefix}.floor.bench.t")
        details: list = []
        observed: list = []
        python_cpu: list = []
        busy, broker_cpu = machine_busy_s(), process_cpu_s(broker)
        progress = _run_job(stack, api, CORES, prefix, tmp_path / f"ckpt-{prefix}", PER_BATCH,
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
