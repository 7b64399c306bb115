"""A real PySpark session (local[2]) reads a Kafka topic as a stream via spark-sql-kafka."""

from __future__ import annotations

import pytest
from confluent_kafka import Producer

from devstack.spark import local_session

from support.kafka_topics import make_topic

pytestmark = pytest.mark.integration


def test_structured_streaming_reads_topic(broker, tmp_path):
    topic = make_topic(broker.bootstrap_servers, partitions=2)
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "acks": "all"})
    sent = {f"k{i}".encode(): f"v{i}".encode() for i in range(50)}
    for key, value in sent.items():
        producer.produce(topic, key=key, value=value)
    assert producer.flush(30) == 0

    spark = local_session(broker, "casscade-test-kafka", cores=2)
    try:
        stream = (spark.readStream.format("kafka")
                  .option("kafka.bootstrap.servers", broker.bootstrap_servers)
                  .option("subscribe", topic).option("startingOffsets", "earliest").load())
        assert stream.isStreaming
        query = (stream.selectExpr("key", "value", "partition", "offset")
                 .writeStream.format("memory").queryName("kafka_rows")
                 .option("checkpointLocation", str(tmp_path / "checkpoint"))
                 .trigger(availableNow=True).start())
        assert query.awaitTermination(180), "the availableNow query did not finish"
        assert query.exception() is None
        rows = spark.sql("SELECT key, value, partition, offset FROM kafka_rows").collect()
    finally:
        spark.stop()

    assert {bytes(r.key): bytes(r.value) for r in rows} == sent
    assert len(rows) == len(sent)
    assert {r.partition for r in rows} == {0, 1}
