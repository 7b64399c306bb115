"""Baseline: how fast confluent-kafka gets acknowledged records into the local broker.

The publisher's target is 50,000 acknowledged row updates/s on one core (design §7); this
measures the ceiling the producer settings it will use (acks=all, idempotence, lz4,
batching) give on this machine, before any decoding. Run with `make bench`.
"""

from __future__ import annotations

import os
import resource
import time
import uuid

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

RECORDS = int(os.environ.get("BENCH_RECORDS", "300000"))
VALUE_BYTES = 200  # about the size of one Avro RowUpdate of a 5-column table


def test_bench_acked_produce_rate(stack) -> None:
    topic = f"bench.{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": stack.bootstrap_servers})  # keep it referenced
    admin.create_topics([NewTopic(topic, num_partitions=6, replication_factor=1)])[topic].result(30)
    producer = Producer({
        "bootstrap.servers": stack.bootstrap_servers, "acks": "all",
        "enable.idempotence": True, "compression.type": "lz4", "linger.ms": 20,
        "batch.size": 1_000_000, "queue.buffering.max.messages": 500_000,
    })
    acked = 0

    def on_delivery(err, _msg) -> None:
        nonlocal acked
        assert err is None, err
        acked += 1

    value = os.urandom(VALUE_BYTES // 2).hex().encode()
    start = time.perf_counter()
    for i in range(RECORDS):
        while True:
            try:
                producer.produce(topic, key=b"k%d" % (i % 10_000), value=value,
                                 on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.05)
        if i % 1000 == 0:
            producer.poll(0)
    assert producer.flush(120) == 0
    elapsed = time.perf_counter() - start
    assert acked == RECORDS
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"\nkafka produce (acks=all, idempotent, lz4): {RECORDS:,} records of "
          f"{VALUE_BYTES} B in {elapsed:.2f}s = {RECORDS / elapsed:,.0f} rows/s, "
          f"{RECORDS * VALUE_BYTES / elapsed / 1e6:.1f} MB/s; peak RSS {rss_mb:.0f} MB")
