"""The exactly-once producers put each event key where the Java producer puts it (Spark's
Kafka sink under at-least-once, Kafka Streams, Flink): the partitions a real transaction
wrote, against the Java client's own partition function run in a JVM."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from devstack.artifacts import find_java, lib_dir
from materializer.kafka.transactions import PartitionTransaction
from shared.kafka_topics import read_to_end
from shared.partitioner import crc32_partition, murmur2_partition

from support.kafka_topics import make_topic

pytestmark = pytest.mark.integration
PARTITIONS = 7
JAVA_PROGRAM = Path(__file__).parents[2] / "support" / "java" / "KeyPartitions.java"


def _java_partitions(stack, keys: list[bytes]) -> list[int]:
    """The partition of each key that the Java client computes."""
    kafka_jars = lib_dir(stack.lib_dir, "kafka")
    done = subprocess.run(
        [str(find_java()), "-cp", f"{kafka_jars}/*", str(JAVA_PROGRAM), str(PARTITIONS)],
        input="\n".join(k.hex() for k in keys), capture_output=True, text=True, timeout=120,
        check=True)
    return [int(line) for line in done.stdout.split()]


def test_events_of_a_transaction_land_in_the_javas_partition_of_their_key(stack) -> None:
    topic = make_topic(stack.bootstrap_servers, partitions=PARTITIONS)
    keys = [json.dumps({"id": n, "c": f"row-{n}"}).encode() for n in range(200)]
    txn = PartitionTransaction({"bootstrap.servers": stack.bootstrap_servers},
                               f"casscade.test.partitions.{topic}")
    try:
        for key in keys:
            txn.produce(topic, key, b"{}")
        txn.commit()
    finally:
        txn.close()
    written = {m.key(): m.partition() for m in read_to_end(stack.bootstrap_servers, topic)}
    java = dict(zip(keys, _java_partitions(stack, keys), strict=True))
    assert written == java
    assert all(java[k] == murmur2_partition(k, PARTITIONS) for k in keys)
    # and not librdkafka's default, which puts most keys elsewhere
    assert sum(java[k] != crc32_partition(k, PARTITIONS) for k in keys) > 100
