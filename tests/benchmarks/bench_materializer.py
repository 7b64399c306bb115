"""Materializer throughput and state size.

(a) Engine-free: `KeyMaterializer.handle` (decode, merge, event rule, JSON envelope) over one
    key's records at a time, on one core: the Python ceiling of the job.
(b) The real Spark job on the local broker, local[1] and local[2]: KEYS partitions x UPDATES
    one-row updates (raw_workload's 5-column int/text table; BENCH_COLUMNS=10: 10 columns)
    in a raw topic; the query runs availableNow with MAX_PER_BATCH records per micro-batch.
    rows/s = rows of the steady micro-batches / their trigger time (the first, with Python
    worker start-up, is reported apart).
    BENCH_SPARK lists the runs as query:cores, query as spark_runs names it
    (partition: the job, its partition stores; or a floor of jvm_floors).
(c) One wide partition: the cost of a one-row batch as the partition grows, with and
    without pages; (d) the same through the real job (BENCH_WIDE_ROWS rows, local[1]).
State size: the partition stores' directory per million keys, and the state blobs' own
bytes per key. Target (design §7): >= 20,000 row updates/s per core.
"""

from __future__ import annotations

import functools
import os
import time
import uuid
from pathlib import Path

from confluent_kafka import Producer
from raw_workload import FORMAT, TABLE, SchemaHeaders, TableSchemas, raw_change, raw_producer
from spark_runs import run_job

from materializer.key_materializer import KeyMaterializer, RawRecord
from materializer.output.event_settings import EventSettings
from materializer.store.layout import STATE_DIR
from shared import rowupdate, topic_names
from shared.kafka_topics import TopicCreator
from shared.schema import TableSchema, table_from_json
from shared.topic_names import TABLE_ID_SIZE

from support import rowupdate_reference

KEYS = int(os.environ.get("BENCH_KEYS", "50000"))
UPDATES = int(os.environ.get("BENCH_UPDATES", "4"))
MAX_PER_BATCH = int(os.environ.get("BENCH_BATCH", "40000"))
# interleaved: update u of every key, then u + 1 (one row per key per micro-batch: the
# worst case); grouped: a key's updates side by side (UPDATES rows per key per batch)
ORDER = os.environ.get("BENCH_ORDER", "interleaved")
RUNS = [(api, int(cores)) for api, cores in (r.split(":") for r in os.environ.get(
    "BENCH_SPARK", "partition:1,partition:2").split(","))]

def test_bench_key_handler_one_core() -> None:
    handler = KeyMaterializer(TableSchemas(), EventSettings(format=FORMAT), "bench",
                              schema_publisher=SchemaHeaders())
    keys = min(KEYS, 20_000)
    batches = [[raw_change(TABLE, k, u) for u in range(UPDATES)] for k in range(keys)]
    states: dict[bytes, bytes | None] = {}
    topic = topic_names.raw_topic("bench")
    start = time.process_time()
    events = 0
    for batch in batches:
        key = batch[0][0]  # a raw key: the handler takes its partition key and table id apart
        res = handler.handle(topic, key[TABLE_ID_SIZE:],
                             [RawRecord(v, 0, i) for i, (_k, v) in enumerate(batch)],
                             states.get(key), None, 1_800_000_000_000,
                             table_id=key[:TABLE_ID_SIZE])
        states[key] = res.state
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
        _k, value = raw_change(WIDE, 1, u)
        rec = rowupdate_reference.decode(value)
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
    res = handler.handle(topic_names.raw_topic("b"), pk, records, state, None,
                         1_800_000_000_000, lambda ids: [pages.get(i) for i in ids],
                         WIDE.id.bytes)
    for i, blob in res.pages.items():
        if blob is None:
            pages.pop(i, None)
        else:
            pages[i] = blob
    return res.state, len(res.state or b"") + sum(len(b or b"") for b in res.pages.values())


def _publish(bootstrap: str, prefix: str) -> int:
    producer = raw_producer(bootstrap, prefix)
    topic = topic_names.raw_topic(prefix)
    n = 0
    pairs = ((k, u) for u in range(UPDATES) for k in range(KEYS)) if ORDER == "interleaved" \
        else ((k, u) for k in range(KEYS) for u in range(UPDATES))
    for k, u in pairs:
        key, value = raw_change(TABLE, k, u)
        producer.produce(topic, key=key, value=value)
        n += 1
        if n % 100_000 == 0:
            producer.poll(0)
    assert producer.flush(120) == 0
    return n


def _send_wide_row(producer: Producer, topic: str, c: int, u: int) -> None:
    """Row `c` of WIDE's partition 1, version `u`, to the raw topic."""
    key, value = raw_change(WIDE, 1, u)  # key: the raw key of WIDE's partition 1
    rec = rowupdate_reference.decode(value)
    rec["clustering"] = [c.to_bytes(4, "big", signed=True)]
    rec["schema_hash"] = WIDE.schema_hash
    producer.produce(topic, key=key, value=rowupdate.encode(rec))


def test_bench_spark_wide_partition(stack, tmp_path) -> None:
    """The real job, one partition of WIDE_ROWS rows, then 20 one-row micro-batches on it:
    the median batch time with pages (default) and without."""
    import statistics

    rows = int(os.environ.get("BENCH_WIDE_ROWS", "50000"))
    cases = [("pages of 256", 256), ("no pages", 10**9)] if rows > 512 else [("small", 256)]
    for label, page_rows in cases:
        prefix = f"wide{uuid.uuid4().hex[:6]}"
        topic = topic_names.raw_topic(prefix)
        creator = TopicCreator(stack.bootstrap_servers, 1, 1)
        creator.ensure(topic)
        creator.ensure(topic_names.schema_topic(prefix))
        producer = Producer({"bootstrap.servers": stack.bootstrap_servers, "linger.ms": 50,
                             "queue.buffering.max.messages": 1_000_000})
        from publisher.kafka_sink import schema_record

        producer.produce(topic_names.schema_topic(prefix), key=WIDE.schema_hash.encode(),
                         value=schema_record(WIDE))
        send = functools.partial(_send_wide_row, producer, topic)
        for c in range(rows):
            send(c, 0)
            if c % 100_000 == 0:
                producer.poll(0)
        assert producer.flush(120) == 0
        ckpt = tmp_path / f"ckpt-{prefix}"
        fill = run_job(stack, "partition", 1, prefix, ckpt, rows, str(page_rows))
        assert sum(n for n, _ in fill) == rows
        for u in range(1, 21):
            send(u * 37 % rows, u)
        assert producer.flush(60) == 0
        batches = run_job(stack, "partition", 1, prefix, ckpt, 1, str(page_rows))
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
        progress = run_job(stack, api, cores, prefix, ckpt, MAX_PER_BATCH)
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
