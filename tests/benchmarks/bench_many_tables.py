"""The materializer as tables are added: the same logical changes over 1, 20 and 100 tables.

Synthetic RF=3 input (bench_rf3's shape: each change three times, as three nodes' publishers
send it, shuffled within blocks): TABLES_CHANGES one-row changes of distinct keys, spread
round-robin over T tables (raw_workload's 5-column table under the names t0..t{T-1},
each its own schema and table id), every table's copies in the one raw topic of
TABLES_PARTITIONS partitions (4) whatever T, the schema records in the schema topic. Then,
one query after the other on the same broker and local[TABLES_CORES] (or BENCH_MASTER's
cluster): every entry of TABLES_MODES (kafka-floor = Spark's Kafka source straight into its
sink, a floor of jvm_floors, a floor topic per table; kafka-floor-one = the same into one
output topic, the sink's share; partition = the job, its partition stores) over every count
in TABLES_COUNTS, each from its own checkpoint, each table's output topic of
TABLES_EVENT_PARTITIONS partitions (1, the job's default events.partitions). A list in
TABLES_PARTITIONS or TABLES_EVENT_PARTITIONS runs every table count with each.

Printed per run: logical changes/s per core over the whole run (first batch included: a
backlog at start is the case users meet) and over the steady batches, the ratio to the
one-table run of the same mode and to the floor of the same table count, and per micro-batch
the tasks that ran (topic-partitions with records; the job's own count) and the
partition stores opened. One event per change is asserted for the job. The raw topic's
partitions, and with them the tasks and stores, do not grow with T: what grows is the
tables (schemas, event topics; the floors' output topics) each task meets. Each run's
topics are deleted after it.
"""

from __future__ import annotations

import json
import os
import random
import time
import uuid
from dataclasses import replace
from pathlib import Path

from confluent_kafka import Producer
from raw_workload import TABLE, floor_topic, raw_change
from spark_runs import run_job, spark_master, transactions_line

from publisher.kafka_sink import schema_record
from shared import rowupdate, topic_names
from shared.kafka_topics import TopicCreator, read_to_end
from shared.schema import TableSchema

from support import rowupdate_reference
from support.kafka_topics import delete_prefixed

CHANGES = int(os.environ.get("TABLES_CHANGES", "120000"))
# of the raw topic; a list runs every count of tables with each
RAW_PARTITIONS = [int(n) for n in os.environ.get("TABLES_PARTITIONS", "4").split(",")]
CORES = int(os.environ.get("TABLES_CORES", "2"))
PER_BATCH = int(os.environ.get("TABLES_BATCH", "200000"))  # the job's default
COUNTS = [int(n) for n in os.environ.get("TABLES_COUNTS", "1,20,100").split(",")]
MODES = os.environ.get("TABLES_MODES", "kafka-floor,partition").split(",")
# partitions of each table's output topic, the job's (events.partitions: its default 1) and
# the floors' alike; a list runs every count of tables with each
EVENT_PARTITIONS = [int(n) for n in os.environ.get("TABLES_EVENT_PARTITIONS", "1").split(",")]
# BENCH_MASTER (spark_runs): a cluster instead of local[TABLES_CORES]; give TABLES_CORES its
# executors' cores
MASTER = spark_master(CORES)
SHUFFLE = 3000


def tables(count: int) -> list[TableSchema]:
    """`count` tables of TABLE's columns named t0..t{count-1} (a schema each)."""
    return [replace(TABLE, table=f"t{i}", id=uuid.UUID(int=i + 1)) for i in range(count)]


def publish(bootstrap: str, prefix: str, schemas: list[TableSchema], seed: int = 3,
            out_partitions: int = 6, raw_partitions: int = 4, floors: bool = True,
            changes: int = CHANGES) -> int:
    """`changes` changes round-robin over `schemas`, three shuffled copies each, into a
    fresh raw topic (with `floors`, the floors' output topics made too, of `out_partitions`
    each: each table's, and <prefix>.floor.all): the copies sent."""
    creator = TopicCreator(bootstrap, raw_partitions, 1)
    schema_topic, raw_topic = topic_names.schema_topic(prefix), topic_names.raw_topic(prefix)
    creator.ensure(schema_topic)
    creator.ensure(raw_topic)
    if floors:  # in one request: a thousand topics made one by one overwhelm the broker
        TopicCreator(bootstrap, out_partitions, 1).ensure_many(
            [f"{prefix}.floor.all", *(floor_topic(prefix, t.id.bytes) for t in schemas)])
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50,
                         "queue.buffering.max.messages": 1_000_000})
    for t in schemas:
        producer.produce(schema_topic, key=t.schema_hash.encode(), value=schema_record(t))
    assert producer.flush(60) == 0
    rng = random.Random(seed)
    block: list[tuple[bytes, bytes]] = []
    sent = 0
    for key in range(changes):
        table = schemas[key % len(schemas)]
        raw_key, value = raw_change(table, key, 0)
        record = rowupdate_reference.decode(value)
        for node in (1, 2, 3):
            source = {**record["source"], "host": f"node-{node}",
                      "position": record["source"]["position"] * node + 31 * node}
            block.append((raw_key, rowupdate.encode({**record, "source": source})))
        if len(block) >= SHUFFLE or key == changes - 1:
            rng.shuffle(block)
            for k, v in block:
                producer.produce(raw_topic, key=k, value=v)
            sent += len(block)
            block.clear()
            producer.poll(0)
    assert producer.flush(120) == 0
    return sent


def test_bench_many_tables(stack, tmp_path: Path) -> None:
    """Changes/s per core with 1, 20 and 100 tables, the job beside Spark's Kafka floor."""
    # (mode, tables, raw partitions, event partitions)
    results: dict[tuple[str, int, int, int], float] = {}
    steadies: dict[tuple[str, int, int, int], float] = {}  # over the batches after the first
    # (tables, raw partitions, event partitions): each with every mode
    runs = [(c, r, p) for c in COUNTS for r in RAW_PARTITIONS for p in EVENT_PARTITIONS]
    for (count, raw, parts), mode in ((run, m) for run in runs for m in MODES):
        schemas = tables(count)
        prefix = f"tables{uuid.uuid4().hex[:6]}"
        sent = publish(stack.bootstrap_servers, prefix, schemas, out_partitions=parts,
                       raw_partitions=raw, floors="floor" in mode)
        assert sent == 3 * CHANGES
        observed: list = []
        details: list = []
        python_cpu: list = []
        started = time.monotonic()
        progress = run_job(stack, mode, CORES, prefix, tmp_path / f"ckpt-{prefix}",
                           PER_BATCH, details=details, observed=observed,
                           python_cpu=python_cpu, event_partitions=parts)
        wall = time.monotonic() - started
        assert sum(n for n, _ in progress) == sent
        whole = sum(ms for _, ms in progress) / 1000
        steady = sum(ms for _, ms in progress[1:]) / 1000
        per_core = CHANGES / whole / CORES
        results[(mode, count, raw, parts)] = per_core
        line = (f"\n{mode}, {count} table(s) in one raw topic of {raw} partitions, "
                f"{parts} partitions per output topic, {MASTER}: "
                f"{CHANGES:,} changes ({sent:,} copies) in {len(progress)} batches, "
                f"{whole:.1f}s of batches ({wall:.1f}s with start-up) = "
                f"{per_core:,.0f} changes/s per core")
        if len(progress) > 1:
            rows = sum(n for n, _ in progress[1:])
            steadies[(mode, count, raw, parts)] = rows / 3 / steady / CORES
            line += f"; steady {steadies[(mode, count, raw, parts)]:,.0f} per core"
            floor_steady = steadies.get(("kafka-floor", count, raw, parts))
            if floor_steady and "floor" not in mode:
                ratio = steadies[(mode, count, raw, parts)] / floor_steady
                line += f" ({ratio:.0%} of the floor's)"
        one = results.get((mode, COUNTS[0], raw, parts))
        floor = results.get(("kafka-floor", count, raw, parts))
        if one and count != COUNTS[0]:
            line += f"; {per_core / one:.0%} of {COUNTS[0]} table(s)"
        if floor and "floor" not in mode:
            line += f"; {per_core / floor:.0%} of the floor"
        line += f"; Python workers {python_cpu[0]:.1f} CPU-s"
        print(line)
        for i, (rows, ms) in enumerate(progress):
            parts = observed[i].get("partition_state", {}) if i < len(observed) else {}
            extra = (f", {parts.get('tasks')} tasks, {parts.get('stores_opened')} stores "
                     f"opened" if parts else "") + transactions_line(
                         parts.get("stats"))
            spans = ", ".join(f"{k} {v / 1000:.1f}s" for k, v in sorted(
                details[i].get("durationMs", {}).items()) if v >= 100)
            print(f"  batch {i}: {rows:,} copies in {ms / 1000:.1f}s, "
                  f"{_ranges(details[i])} topic-partitions with records{extra} ({spans})")
        if "floor" not in mode:
            events = sum(1 for t in schemas for m in read_to_end(
                stack.bootstrap_servers, topic_names.event_topic(prefix, t.keyspace, t.table))
                if m.value() is not None)
            assert events == CHANGES, (mode, count, events)
        # its thousand topics go, their logs removed before the next run
        delete_prefixed(stack.bootstrap_servers, prefix, stack.kafka_dir / "data")


def _ranges(detail: dict) -> int:
    """Topic-partitions whose offsets moved in a batch (the source's tasks)."""
    moved = 0
    for source in detail.get("sources", []):
        start, end = ((json.loads(o) if isinstance(o, str) else o) or {}
                      for o in (source.get("startOffset"), source.get("endOffset")))
        for topic, parts in end.items():
            for p, off in parts.items():
                moved += int(off) > int((start.get(topic) or {}).get(p, 0))
    return moved

