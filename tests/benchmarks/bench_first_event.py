"""From `casscade materializer run` to its first change event, on a warm machine.

FIRST_CHANGES changes, each as three replicas' copies (rf3_copies' input shape), wait in the
raw topic; the job starts as an operator starts it (`python -m casscade.cli materializer
run`, local[2], spark.class_archive_dir set, its own checkpoint) and a consumer of the
event topic takes the time of the first event. The job runs FIRST_ROUNDS times after a
first run that writes the driver's class archive, reported apart (a machine is warm once
the archive exists and the jars are in the page cache). Printed per run: seconds to the
first event and to the job's exit. Issue 14's goal: the first event within 15 s. With
FIRST_TABLES (a list of counts, default 1) the changes go round-robin over that many
tables (bench_many_tables' input: a schema and an event topic each), and the first event
of any of them counts (issue 50's goal: within 15 s at 1,000 tables). FIRST_DRIVER_JIT
(spark.driver_jit, "c1" by default; "c1,tiered" alternates them in each round, each with
its own first run, as the archive depends on the JVM's flags).
"""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path

import bench_many_tables as many_tables
from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
from raw_workload import raw_producer
from rf3_copies import copies

from shared import topic_names
from shared.kafka_topics import TopicCreator

from support.kafka_topics import delete_prefixed
from support.materializer_harness import kill_group, materializer_command, start_materializer

CHANGES = int(os.environ.get("FIRST_CHANGES", "2000"))
ROUNDS = int(os.environ.get("FIRST_ROUNDS", "2"))
TABLES = [int(n) for n in os.environ.get("FIRST_TABLES", "1").split(",")]
JITS = os.environ.get("FIRST_DRIVER_JIT", "c1").split(",")


def _publish(bootstrap: str, prefix: str) -> None:
    producer = raw_producer(bootstrap, prefix)
    topic = topic_names.raw_topic(prefix)
    for key in range(CHANGES):
        for raw_key, value in copies(key, 0):
            producer.produce(topic, key=raw_key, value=value)
    assert producer.flush(60) == 0


def _event_topics(bootstrap: str, prefix: str, count: int) -> list[str]:
    """CHANGES changes (three copies each) waiting over `count` tables; their event
    topics, made beforehand (2 partitions for one table, else 1, the job's default)."""
    if count == 1:
        _publish(bootstrap, prefix)
        topics = [topic_names.event_topic(prefix, "bench", "t")]
    else:
        schemas = many_tables.tables(count)
        many_tables.publish(bootstrap, prefix, schemas, floors=False, changes=CHANGES)
        topics = [topic_names.event_topic(prefix, t.keyspace, t.table) for t in schemas]
    TopicCreator(bootstrap, 2 if count == 1 else 1, 1).ensure_many(topics)
    return topics


def _first_event(stack, archive: Path, work: Path, count: int = 1, jit: str = "c1"
                 ) -> tuple[float, float]:
    """Seconds from the job's start (spark.driver_jit `jit`) to its first event (of any of
    `count` tables), and to its exit."""
    prefix = f"first{uuid.uuid4().hex[:6]}"
    # the event topics made beforehand and read by assignment: no group join or topic
    # discovery in the measured time
    topics = _event_topics(stack.bootstrap_servers, prefix, count)
    consumer = Consumer({"bootstrap.servers": stack.bootstrap_servers,
                         "group.id": uuid.uuid4().hex, "fetch.wait.max.ms": 10,
                         "isolation.level": "read_committed"})
    meta = consumer.list_topics(timeout=30).topics
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING)
                     for topic in topics for p in meta[topic].partitions])
    cmd = materializer_command(stack, prefix, work / f"ckpt-{prefix}",
                               f"spark.class_archive_dir={archive}",
                               f"spark.driver_jit={jit}")
    started = time.monotonic()
    job = start_materializer(cmd, work / f"{prefix}.log")
    first = exited = None
    try:
        while first is None and time.monotonic() - started < 180:
            msg = consumer.poll(0.05)
            if msg is not None and msg.error() is None:
                first = time.monotonic() - started
            elif exited is None and job.poll() is not None:
                exited = time.monotonic()
            assert exited is None or time.monotonic() - exited < 10, \
                f"the job exited ({job.returncode}) without an event: {work / prefix}.log"
        assert first is not None, "no event within 180 s"
        job.wait(180)
        assert job.returncode == 0, (work / f"{prefix}.log").read_text()[-3000:]
        return first, time.monotonic() - started
    finally:
        consumer.close()
        if job.poll() is None:
            kill_group(job)
        # a thousand tables' topics, their logs removed before the next run
        delete_prefixed(stack.bootstrap_servers, prefix, stack.kafka_dir / "data")


def test_bench_first_event(stack, tmp_path: Path) -> None:
    """Seconds to the job's first event, the class archive written first."""
    archive = tmp_path / "class-archive"
    for jit in JITS:
        first, done = _first_event(stack, archive, tmp_path, jit=jit)
        print(f"\nfirst run, spark.driver_jit {jit} (writes the class archive): first event "
              f"after {first:.1f}s, job ended after {done:.1f}s")
    for count in TABLES:
        for rnd in range(ROUNDS):
            for jit in JITS:
                first, done = _first_event(stack, archive, tmp_path, count, jit)
                print(f"round {rnd + 1}: {CHANGES:,} changes x 3 copies over {count} "
                      f"table(s), spark.driver_jit {jit}; first event after {first:.1f}s, "
                      f"job ended after {done:.1f}s")
