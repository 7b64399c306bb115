"""What a plain producer's first writes to many new topics cost the broker, by the size of
their segments' indexes (docs/benchmarks.md "Many tables (synthetic input)").

A broker maps each new segment's offset and time index (`segment.index.bytes`, 10 MiB by
default), and the first writes fault them in. For each round and each index size in
NEWTOPICS_INDEX ("default": the broker's; else bytes), NEWTOPICS_COUNT new one-partition
topics are made and a plain idempotent librdkafka producer (not the job) writes
NEWTOPICS_RECORDS records of NEWTOPICS_BYTES bytes to each, one topic after the other per
record; printed: the seconds to the last acknowledgement and the broker's CPU seconds over
them, user and kernel apart. The topics are deleted, and their files gone, before the next.
"""

from __future__ import annotations

import os
import time
import uuid

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from cpu_use import process_user_system_s

from devstack import kafka

from support.kafka_topics import delete_prefixed

COUNT = int(os.environ.get("NEWTOPICS_COUNT", "1000"))
RECORDS = int(os.environ.get("NEWTOPICS_RECORDS", "60"))
VALUE_BYTES = int(os.environ.get("NEWTOPICS_BYTES", "100"))
INDEXES = os.environ.get("NEWTOPICS_INDEX", "default,1048576").split(",")
ROUNDS = int(os.environ.get("NEWTOPICS_ROUNDS", "2"))


def test_bench_first_writes_to_new_topics(stack) -> None:
    broker = kafka.running_pid(stack)
    assert broker is not None, "the stack's broker is not running"
    for round_ in range(ROUNDS):
        for index in INDEXES:
            seconds, user, system = _first_writes(stack, broker, index)
            print(f"\nround {round_ + 1}, {COUNT:,} new topics, index {index}: "
                  f"{RECORDS} x {VALUE_BYTES} B to each in {seconds:.1f} s; the broker's "
                  f"CPU over them: user {user:.1f} s, kernel {system:.1f} s")


def _first_writes(stack, broker: int, index: str) -> tuple[float, float, float]:
    """Seconds to write to COUNT new topics with `index`, the broker's user and kernel
    CPU seconds over them."""
    prefix = f"newtopics{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": stack.bootstrap_servers})
    config = {} if index == "default" else {"segment.index.bytes": index}
    topics = [f"{prefix}.t{i}" for i in range(COUNT)]
    try:
        for future in admin.create_topics([NewTopic(t, 1, 1, config=config)
                                           for t in topics]).values():
            future.result(60)
        time.sleep(5)  # the new partitions' leaders settled
        producer = Producer({"bootstrap.servers": stack.bootstrap_servers, "acks": "all",
                             "enable.idempotence": True, "linger.ms": 100})
        value = b"x" * VALUE_BYTES
        failed: list[object] = []

        def on_delivery(err: object, _msg: object) -> None:
            if err is not None:
                failed.append(err)

        user0, system0 = process_user_system_s(broker)
        start = time.monotonic()
        for r in range(RECORDS):
            for topic in topics:
                while True:
                    try:
                        producer.produce(topic, value, key=b"%d" % r, on_delivery=on_delivery)
                        break
                    except BufferError:
                        producer.poll(0.05)
            producer.poll(0)
        assert producer.flush(120) == 0, "records left unacknowledged"
        assert not failed, failed[:3]
        seconds = time.monotonic() - start
        user1, system1 = process_user_system_s(broker)
    finally:
        delete_prefixed(stack.bootstrap_servers, prefix, stack.kafka_dir / "data")
    return seconds, user1 - user0, system1 - system0
