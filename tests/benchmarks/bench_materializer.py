"""Materializer throughput and state size.

(a) Engine-free: `KeyMaterializer.handle` (decode, merge, event rule, JSON envelope) over one
    key's records at a time, on one core: the Python ceiling of the job.
(b) The real Spark job on the local broker, local[1] and local[2]: KEYS partitions x UPDATES
    one-row updates (a 5-column int/text table; BENCH_COLUMNS=10: 10 columns, as for every
    benchmark that takes its table from here) in a raw topic; the query runs availableNow
    with MAX_PER_BATCH records per micro-batch. rows/s = rows of the steady micro-batches /
    their trigger time (the first, with Python worker start-up, is reported apart).
    BENCH_SPARK lists the runs as query:cores, query as bench_jvm_floor names it
    (partition: the job, its partition stores).
(c) One wide partition: the cost of a one-row batch as the partition grows, with and
    without pages; (d) the same through the real job (BENCH_WIDE_ROWS rows, local[1]).
State size: the partition stores' directory per million keys, and the state blobs' own
bytes per key. Target (design §7): >= 20,000 row updates/s per core.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

from confluent_kafka import Producer

from materializer.key_materializer import KeyMaterializer, RawRecord
from materializer.output.avro_registry import SINGLE_OBJECT_MAGIC, schema_fingerprint
from materializer.output.event_settings import EventSettings
from materializer.spark.partition_job import STATE_DIR
from shared import rowupdate
from shared.kafka_topics import TopicCreator
from shared.schema import TableSchema, table_from_json

KEYS = int(os.environ.get("BENCH_KEYS", "50000"))
UPDATES = int(os.environ.get("BENCH_UPDATES", "4"))
MAX_PER_BATCH = int(os.environ.get("BENCH_BATCH", "40000"))
# interleaved: update u of every key, then u + 1 (one row per key per micro-batch: the
# worst case); grouped: a key's updates side by side (UPDATES rows per key per batch)
ORDER = os.environ.get("BENCH_ORDER", "interleaved")
RUNS = [(api, int(cores)) for api, cores in (r.split(":") for r in os.environ.get(
    "BENCH_SPARK", "partition:1,partition:2").split(","))]

# the table's columns, its key included: k, then c1..c(N-1), int and text in turn; every
# change writes them all (5: the figures in the README; 10: issue 14's wider rows)
COLUMNS = int(os.environ.get("BENCH_COLUMNS", "5"))
TABLE = table_from_json({
    "keyspace": "bench", "table": "t", "id": "7b0f2a52-6c9e-4d1e-9b61-3c1d2f8e0a01",
    "columns": [{"name": "k", "kind": "partition_key", "position": 0, "type": "int"},
                *({"name": f"c{i}", "kind": "regular", "position": -1,
                   "type": "int" if i % 2 else "text"} for i in range(1, COLUMNS))]}, {})


def _values(key: int, update: int) -> list[tuple[str, bytes]]:
    """The regular columns' values of one change (c1..c4 as before BENCH_COLUMNS)."""
    first = [("c1", (key + update).to_bytes(4, "big", signed=True)),
             ("c2", f"text-{key}-{update}".encode()),
             ("c3", update.to_bytes(4, "big", signed=True)), ("c4", b"x" * 20)]
    more = [(f"c{i}", ((key * i + update) % 2**31).to_bytes(4, "big", signed=True) if i % 2
             else f"value-{i}-{update}".encode()) for i in range(5, COLUMNS)]
    return (first + more)[:COLUMNS - 1]


def _record(table: TableSchema, key: int, update: int) -> tuple[bytes, bytes]:
    ts = 1_700_000_000_000_000 + update * 1000 + key
    pk = key.to_bytes(4, "big", signed=True)
    cells = [{"column": c, "path": None, "value": v, "timestamp": ts, "ttl": 0,
              "local_deletion_time": None, "tombstone": False}
             for c, v in _values(key, update)]
    rec = {"table_id": table.id.bytes, "keyspace": table.keyspace, "table": table.table,
           "schema_hash": table.schema_hash, "partition_key": pk, "clustering": [],
           "kind": "ROW", "deletion": None, "shadowable": False, "range": None,
           "liveness": {"timestamp": ts, "ttl": 0, "local_expiration_time": None},
           "cells": cells, "complex_deletions": [],
           "source": {"host": "h", "datacenter": "dc", "file": "CommitLog-7-1.log",
                      "segment_id": 1, "position": 100 + key * 10 + update, "index": 0,
                      "commitlog_version": 7, "messaging_version": 12}}
    return pk, rowupdate.encode(rec)


FORMAT = os.environ.get("BENCH_FORMAT", "json")  # event encoding: json or avro


class _Headers:
    """Single-object headers without the schema topic write (that happens once per schema)."""

    def header(self, subject: str, schema: object) -> bytes:
        return SINGLE_OBJECT_MAGIC + schema_fingerprint(schema)


class _Schemas:
    def get(self, schema_hash: str) -> TableSchema:
        assert schema_hash == TABLE.schema_hash
        return TABLE


def test_bench_key_handler_one_core() -> None:
    handler = KeyMaterializer(_Schemas(), EventSettings(format=FORMAT), "bench",
                         schema_publisher=_Headers())
    keys = min(KEYS, 20_000)
    batches = [[_record(TABLE, k, u) for u in range(UPDATES)] for k in range(keys)]
    states: dict[bytes, bytes | None] = {}
    start = time.process_time()
    events = 0
    for batch in batches:
        pk = batch[0][0]
        res = handler.handle("bench.raw.bench.t", pk,
                             [RawRecord(v, 0, i) for i, (_k, v) in enumerate(batch)],
                             states.get(pk), None, 1_800_000_000_000)
        states[pk] = res.state
        events += len(res.outputs)
    cpu = time.process_time() - start
    rows = keys * UPDATES
    blob = sum(len(s or b"") for s in states.values()) / keys
    print(f"\nKeyMaterializer ({FORMAT} events): {rows:,} row updates ({UPDATES} per key) -> "
          f"{events:,} events in "
          f"{cpu:.2f}s CPU = {rows / cpu:,.0f} rows/s on one core; state blob "
          f"{blob:.0f} B/key = {blob * 1e6 / 2**20:,.0f} MB per million keys")


WIDE = TABLE.__class__(**{**TABLE.__dict__, "table": "wide", "columns": (
    *TABLE.columns, *table_from_json({
        "keyspace": "bench", "table": "x", "id": str(TABLE.id), "columns": [
            {"name": "c", "kind": "clustering", "position": 0, "type": "int",
             "clustering_order": "asc"}]}, {}).columns)})


def test_bench_wide_partition_batch_cost() -> None:
    """One partition of N rows, one one-row update per micro-batch: with pages (the default,
    `spark.state_page_rows` 256) a batch reads and writes one page; without (one state
    value per partition, as before pages) it loads and stores the whole partition."""
    import statistics

    class One:
        def get(self, _h: str) -> TableSchema:
            return WIDE

    def raw(c: int, u: int, offset: int) -> RawRecord:
        _k, value = _record(WIDE, 1, u)
        rec = rowupdate.decode(value)
        rec["clustering"] = [c.to_bytes(4, "big", signed=True)]
        rec["schema_hash"] = WIDE.schema_hash
        return RawRecord(rowupdate.encode(rec), 0, offset)

    pk = (1).to_bytes(4, "big", signed=True)
    for label, page_rows in (("pages of 256", 256), ("no pages", 10**9)):
        handler = KeyMaterializer(One(), EventSettings(), "bench", page_rows=page_rows)
        for rows in (1_000, 10_000, 50_000):
            pages: dict[int, bytes] = {}
            step = functools.partial(_wide_step, handler, pk, pages)
            state, _ = step([raw(c, 0, c) for c in range(rows)], None)
            total = len(state or b"") + sum(len(b) for b in pages.values())
            times, written = [], []
            for u in range(1, 21):
                record = raw(u * 37 % rows, u, rows + u)
                start = time.perf_counter()
                state, nbytes = step([record], state)
                times.append(time.perf_counter() - start)
                written.append(nbytes)
            median = statistics.median(times)
            print(f"\nwide partition, {label}: {rows:,} rows, state {total / 2**20:.1f} MB; "
                  f"a one-row batch costs {median * 1000:.2f} ms (median of 20) = "
                  f"{1 / median:,.0f} such batches/s, writes "
                  f"{statistics.median(written) / 1024:,.1f} KB")


def _wide_step(handler: KeyMaterializer, pk: bytes, pages: dict[int, bytes],
               records: list[RawRecord], state: bytes | None) -> tuple[bytes | None, int]:
    """One batch of the wide partition; its page writes applied to `pages`; bytes written."""
    res = handler.handle("b.raw.bench.wide", pk, records, state, None, 1_800_000_000_000,
                         lambda ids: [pages.get(i) for i in ids])
    for i, blob in res.pages.items():
        if blob is None:
            pages.pop(i, None)
        else:
            pages[i] = blob
    return res.state, len(res.state or b"") + sum(len(b or b"") for b in res.pages.values())


RUN = r"""
import json, os, sys, time
from pathlib import Path
from materializer.spark import job
from materializer.settings import MaterializerConfig
api, cores, bootstrap, prefix, ckpt, per_batch = sys.argv[1:7]
page_rows = int(sys.argv[7]) if len(sys.argv) > 7 else None
cfg = MaterializerConfig()
if page_rows is not None:
    cfg.spark.state_page_rows = page_rows
cfg.kafka.bootstrap_servers, cfg.kafka.topic_prefix = bootstrap, prefix
cfg.kafka.max_offsets_per_trigger = int(per_batch)
# BENCH_MASTER: a cluster's master (spark://...), `cores` then its executors' cores
cfg.spark.master = os.environ.get("BENCH_MASTER") or f"local[{cores}]"
cfg.spark.checkpoint = ckpt
cfg.spark.driver_memory = "2g"
if api.startswith("jvm-floor"):  # its shuffle and state store, which the job no longer sets
    cfg.spark.conf.update({
        "spark.sql.shuffle.partitions": cores,
        "spark.sql.streaming.stateStore.providerClass":
            "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
        "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true"})
if os.environ.get("BENCH_DEDUPE_S"):
    cfg.spark.dedupe_window_s = int(os.environ["BENCH_DEDUPE_S"])
cfg.events.format = os.environ.get("BENCH_FORMAT", "json")  # the events' encoding
if os.environ.get("BENCH_EXTRA_CP"):  # local mode: the driver's class path is the executor's
    cfg.spark.conf["spark.driver.extraClassPath"] = os.environ["BENCH_EXTRA_CP"]
for item in filter(None, os.environ.get("BENCH_SPARK_CONF", "").split(";")):
    name, value = item.split("=", 1)  # spark.conf entries to try, name=value;name=value
    cfg.spark.conf[name] = value
if "+kafka" in api:  # the Kafka client settings of BENCH_KAFKA_TUNED (c:name=v,p:name=v)
    api = api.replace("+kafka", "")
    for item in filter(None, os.environ.get("BENCH_KAFKA_TUNED", "").split(",")):
        side, setting = item.split(":", 1)
        name, value = setting.split("=", 1)
        (cfg.kafka.consumer if side == "c" else cfg.kafka.producer)[name] = value
if api != "partition" and "floor" not in api:
    sys.exit(f"unknown query {api!r}: partition or a floor of bench_jvm_floor")
spark = job.session(cfg, available_now=True)
spark.sparkContext.setLogLevel("ERROR")
if api == "partition":
    query = job.start(spark, cfg, available_now=True)
else:
    from bench_jvm_floor import start_floor
    query = start_floor(spark, cfg, api)
query.awaitTermination()
assert query.exception() is None, query.exception()
from cpu_use import python_workers_cpu_s  # before the stop: the workers go with it
print(f"PYCPU {python_workers_cpu_s()}")
done = [p for p in query.recentProgress if p["numInputRows"]]
print("OBSERVED " + json.dumps([{k: v.asDict() for k, v in (p.observedMetrics or {}).items()}
                                for p in done]))
print("PROGRESS " + json.dumps([(p["numInputRows"], p["durationMs"].get("triggerExecution", 0))
                                for p in done]))
print("DETAIL " + json.dumps([{"durationMs": p["durationMs"], "operators": [
    {k: o.get(k) for k in ("operatorName", "numRowsTotal", "numRowsUpdated", "numRowsRemoved",
                           "allUpdatesTimeMs", "allRemovalsTimeMs", "commitTimeMs",
                           "memoryUsedBytes", "numRowsDroppedByWatermark", "customMetrics")}
    for o in p.get("stateOperators", [])],
    "sources": [{k: s.get(k) for k in ("startOffset", "endOffset")}
                for s in p.get("sources", [])]} for p in done]))
spark.stop()
"""


def _publish(bootstrap: str, prefix: str) -> int:
    from publisher.kafka_sink import schema_record

    creator = TopicCreator(bootstrap, 2, 1)
    topic = f"{prefix}.raw.bench.t"
    creator.ensure(topic)
    creator.ensure(f"{prefix}.schemas")
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50,
                         "queue.buffering.max.messages": 1_000_000})
    producer.produce(f"{prefix}.schemas", key=TABLE.schema_hash.encode(),
                     value=schema_record(TABLE))
    n = 0
    pairs = ((k, u) for u in range(UPDATES) for k in range(KEYS)) if ORDER == "interleaved" \
        else ((k, u) for k in range(KEYS) for u in range(UPDATES))
    for k, u in pairs:
        key, value = _record(TABLE, k, u)
        producer.produce(topic, key=key, value=value)
        n += 1
        if n % 100_000 == 0:
            producer.poll(0)
    assert producer.flush(120) == 0
    return n


def _run_job(stack, api: str, cores: int, prefix: str, ckpt: Path, per_batch: int,
             *extra: str, dedupe_s: int | None = None, details: list | None = None,
             observed: list | None = None, master: str | None = None,
             python_cpu: list | None = None) -> list[tuple[int, int]]:
    """Query `api` (RUN: the job or a floor) over what the raw topics hold now: (rows, ms)
    of each non-empty batch; `dedupe_s`: spark.dedupe_window_s (default: the job's own);
    `details` gets each such batch's durations (ms) and state operators' metrics (only
    jvm-floor has any) from Spark's progress report, `observed` its observed metrics,
    `python_cpu` the CPU seconds its Python workers used over the run (start included);
    `master`: a cluster's (default: BENCH_MASTER, else local[cores])."""
    here = Path(__file__).parent
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(here), os.getcwd()]),
               BENCH_DEDUPE_S="" if dedupe_s is None else str(dedupe_s))
    if master is not None:
        env["BENCH_MASTER"] = master
    out = subprocess.run([sys.executable, "-c", RUN, api, str(cores), stack.bootstrap_servers,
                          prefix, str(ckpt), str(per_batch), *extra],
                         env=env, capture_output=True, text=True, timeout=1800)
    assert out.returncode == 0, out.stderr[-3000:]
    if details is not None:
        details.extend(json.loads(out.stdout.split("DETAIL ", 1)[1].splitlines()[0]))
    if observed is not None:  # each such batch's observed metrics (the partition stores')
        observed.extend(json.loads(out.stdout.split("OBSERVED ", 1)[1].splitlines()[0]))
    if python_cpu is not None:
        python_cpu.append(float(out.stdout.split("PYCPU ", 1)[1].splitlines()[0]))
    return json.loads(out.stdout.split("PROGRESS ", 1)[1].splitlines()[0])


def _send_wide_row(producer: Producer, topic: str, c: int, u: int) -> None:
    """Row `c` of WIDE's partition 1, version `u`, to the raw topic."""
    _k, value = _record(WIDE, 1, u)
    rec = rowupdate.decode(value)
    rec["clustering"] = [c.to_bytes(4, "big", signed=True)]
    rec["schema_hash"] = WIDE.schema_hash
    producer.produce(topic, key=(1).to_bytes(4, "big", signed=True), value=rowupdate.encode(rec))


def test_bench_spark_wide_partition(stack, tmp_path) -> None:
    """The real job, one partition of WIDE_ROWS rows, then 20 one-row micro-batches on it:
    the median batch time with pages (default) and without."""
    import statistics

    rows = int(os.environ.get("BENCH_WIDE_ROWS", "50000"))
    cases = [("pages of 256", 256), ("no pages", 10**9)] if rows > 512 else [("small", 256)]
    for label, page_rows in cases:
        prefix = f"wide{uuid.uuid4().hex[:6]}"
        topic = f"{prefix}.raw.bench.wide"
        creator = TopicCreator(stack.bootstrap_servers, 1, 1)
        creator.ensure(topic)
        creator.ensure(f"{prefix}.schemas")
        producer = Producer({"bootstrap.servers": stack.bootstrap_servers, "linger.ms": 50,
                             "queue.buffering.max.messages": 1_000_000})
        from publisher.kafka_sink import schema_record

        producer.produce(f"{prefix}.schemas", key=WIDE.schema_hash.encode(),
                         value=schema_record(WIDE))
        send = functools.partial(_send_wide_row, producer, topic)
        for c in range(rows):
            send(c, 0)
            if c % 100_000 == 0:
                producer.poll(0)
        assert producer.flush(120) == 0
        ckpt = tmp_path / f"ckpt-{prefix}"
        fill = _run_job(stack, "partition", 1, prefix, ckpt, rows, str(page_rows))
        assert sum(n for n, _ in fill) == rows
        for u in range(1, 21):
            send(u * 37 % rows, u)
        assert producer.flush(60) == 0
        batches = _run_job(stack, "partition", 1, prefix, ckpt, 1, str(page_rows))
        assert [n for n, _ in batches] == [1] * 20
        ms = statistics.median(t for _, t in batches[1:])  # the first starts the workers
        print(f"\nSpark local[1], one {rows:,}-row partition, {label}: fill "
              f"{fill[0][1] / 1000:.1f}s; a one-row micro-batch {ms:,.0f} ms (median of 19)")


def _du(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def test_bench_spark_job(stack, tmp_path) -> None:
    rows = KEYS * UPDATES
    for api, cores in RUNS:
        prefix = f"bench{uuid.uuid4().hex[:6]}"
        assert _publish(stack.bootstrap_servers, prefix) == rows
        ckpt = tmp_path / f"ckpt-{prefix}"
        progress = _run_job(stack, api, cores, prefix, ckpt, MAX_PER_BATCH)
        assert sum(n for n, _ in progress) == rows
        first, steady = progress[0], progress[1:]
        steady_rows = sum(n for n, _ in steady)
        steady_ms = sum(ms for _, ms in steady)
        label = "the job (partition stores)" if api == "partition" else api
        state = _du(ckpt / STATE_DIR)  # the stores, beside a local checkpoint; floors: none
        size = (f"; partition stores {state / 2**20:.1f} MB = "
                f"{state / KEYS * 1e6 / 2**20:,.0f} MB per million keys" if state else "")
        print(f"\n{label} local[{cores}]: {rows:,} row updates over {KEYS:,} keys ({ORDER}); "
              f"first batch "
              f"{first[0]:,} rows in {first[1] / 1000:.1f}s; steady {steady_rows:,} rows in "
              f"{steady_ms / 1000:.1f}s = {steady_rows / (steady_ms / 1000):,.0f} rows/s{size}")


def _bench_topic(bootstrap: str, prefix: str) -> Producer:
    """A raw topic of 2 partitions and the schema topic, with TABLE's schema record in it."""
    from publisher.kafka_sink import schema_record

    creator = TopicCreator(bootstrap, 2, 1)
    creator.ensure(f"{prefix}.raw.bench.t")
    creator.ensure(f"{prefix}.schemas")
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50,
                         "queue.buffering.max.messages": 1_000_000})
    producer.produce(f"{prefix}.schemas", key=TABLE.schema_hash.encode(),
                     value=schema_record(TABLE))
    return producer
