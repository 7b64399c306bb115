"""A real PySpark session (local[2]) reads a Kafka topic as a stream via spark-sql-kafka."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from confluent_kafka import Producer
from test_kafka_broker import make_topic

from devstack.spark import local_session
from materializer.spark.copy_dedupe import drop_copies
from shared import rowupdate

pytestmark = pytest.mark.integration


def test_structured_streaming_reads_topic(stack, tmp_path):
    topic = make_topic(stack.bootstrap_servers, partitions=2)
    producer = Producer({"bootstrap.servers": stack.bootstrap_servers, "acks": "all"})
    sent = {f"k{i}".encode(): f"v{i}".encode() for i in range(50)}
    for key, value in sent.items():
        producer.produce(topic, key=key, value=value)
    assert producer.flush(30) == 0

    spark = local_session(stack, "casscade-test-kafka", cores=2)
    try:
        stream = (spark.readStream.format("kafka")
                  .option("kafka.bootstrap.servers", stack.bootstrap_servers)
                  .option("subscribe", topic).option("startingOffsets", "earliest").load())
        assert stream.isStreaming
        query = (stream.selectExpr("key", "value", "partition", "offset")
                 .writeStream.format("memory").queryName("kafka_rows")
                 .option("checkpointLocation", str(tmp_path / "checkpoint"))
                 .trigger(availableNow=True).start())
        assert query.awaitTermination(180), "the availableNow query did not finish"
        assert query.exception() is None
        rows = spark.sql("SELECT key, value, partition, offset FROM kafka_rows").collect()
        kept = _through_the_copy_dedupe(spark, stack, tmp_path)
    finally:
        spark.stop()

    # the record run alone: one of its two replicas' copies; the batch: both records
    assert sorted(kept) == sorted([ALONE[0], *BATCH]) or \
        sorted(kept) == sorted([ALONE_COPY[0], *BATCH]), [v[:40].hex() for v in kept]

    assert {bytes(r.key): bytes(r.value) for r in rows} == sent
    assert len(rows) == len(sent)
    assert {r.partition for r in rows} == {0, 1}


def _update(position: int, host: str, *rows: tuple[str, int | None, int, str]) -> list[bytes]:
    """The raw values the publisher on `host` writes for one mutation of a ks.t partition:
    rows of (kind, clustering, write time, value)."""
    table_id = uuid.UUID(int=7).bytes
    return rowupdate.encode_update([{
        "table_id": table_id, "keyspace": "ks", "table": "t", "schema_hash": "h" * 16,
        "partition_key": b"\x00\x00\x00\x02", "kind": kind,
        "clustering": [] if c is None else [c.to_bytes(4, "big")], "shadowable": False,
        "range": None, "deletion": None, "complex_deletions": [],
        "liveness": None if c is None else {"timestamp": ts, "ttl": 0,
                                             "local_expiration_time": None},
        "cells": [{"column": "s" if c is None else "v", "path": None, "value": v.encode(),
                   "timestamp": ts, "ttl": 0, "local_deletion_time": None,
                   "tombstone": False}],
        "source": {"host": host, "datacenter": "dc1", "file": "CommitLog-7-5.log",
                   "segment_id": 5, "position": position, "index": i,
                   "commitlog_version": 7, "messaging_version": 12}}
        for i, (kind, c, ts, v) in enumerate(rows)])


# UPDATE t USING TIMESTAMP 1000 SET s = 'a' WHERE p = 2 alone (on two replicas), and the
# same statement in a batch with a row write: one record's content in two mutations
STATIC: tuple[str, Any, int, str] = ("STATIC_ROW", None, 1000, "a")
ALONE = _update(10, "node-1", STATIC)
ALONE_COPY = _update(90, "node-2", STATIC)
BATCH = _update(20, "node-1", STATIC, ("ROW", 1, 2000, "x"))


def _through_the_copy_dedupe(spark: Any, stack: Any, tmp_path: Any) -> list[bytes]:
    """The values `materializer.spark.copy_dedupe` lets through of ALONE, its copy and BATCH."""
    assert rowupdate.digest_of(ALONE[0]) == rowupdate.digest_of(BATCH[0])
    topic = make_topic(stack.bootstrap_servers, partitions=1)
    producer = Producer({"bootstrap.servers": stack.bootstrap_servers, "acks": "all"})
    for value in (*ALONE, *ALONE_COPY, *BATCH):
        producer.produce(topic, key=b"\x00\x00\x00\x02", value=value)
    assert producer.flush(30) == 0
    raw = (spark.readStream.format("kafka")
           .option("kafka.bootstrap.servers", stack.bootstrap_servers)
           .option("subscribe", topic).option("startingOffsets", "earliest").load())
    query = (drop_copies(raw, 60).select("value").writeStream.format("memory")
             .queryName("deduped").option("checkpointLocation", str(tmp_path / "dedupe"))
             .trigger(availableNow=True).start())
    assert query.awaitTermination(180), "the availableNow query did not finish"
    assert query.exception() is None
    return [bytes(r.value) for r in spark.sql("SELECT value FROM deduped").collect()]
