"""The local KRaft broker takes and serves messages through confluent-kafka."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient

from support.kafka_topics import make_topic

pytestmark = pytest.mark.integration


def test_produce_then_consume_round_trip(stack):
    topic = make_topic(stack.bootstrap_servers)
    producer = Producer({"bootstrap.servers": stack.bootstrap_servers, "acks": "all",
                         "enable.idempotence": True, "compression.type": "lz4"})
    acked: list[tuple[bytes, int, int]] = []

    def on_delivery(err, msg):
        assert err is None, err
        acked.append((msg.key(), msg.partition(), msg.offset()))

    sent = [(f"key-{i % 7}".encode(), f"value-{i}".encode()) for i in range(100)]
    for key, value in sent:
        producer.produce(topic, key=key, value=value, on_delivery=on_delivery)
    assert producer.flush(30) == 0
    assert len(acked) == len(sent)

    consumer = Consumer({"bootstrap.servers": stack.bootstrap_servers,
                         "group.id": f"g-{uuid.uuid4().hex[:8]}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    got: list[tuple[bytes, bytes, int]] = []
    try:
        for _ in range(200):
            if len(got) == len(sent):
                break
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            got.append((msg.key(), msg.value(), msg.partition()))
    finally:
        consumer.close()

    assert sorted((k, v) for k, v, _ in got) == sorted(sent)
    # One key always lands in one partition, and within it keeps the order it was sent in.
    partitions: dict[bytes, set[int]] = {}
    for key, _, part in got:
        partitions.setdefault(key, set()).add(part)
    assert all(len(parts) == 1 for parts in partitions.values())
    for key in partitions:
        assert [v for k, v, _ in got if k == key] == [v for k, v in sent if k == key]


def test_topics_made_at_once_take_writes_when_ensure_returns(stack):
    """TopicCreator.ensure_many returns only once every partition of every new topic is
    served by its leader: a ListOffsets request (served where a produce is) from another
    client succeeds at once on each, which a leader in the metadata alone did not give."""
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import OffsetSpec

    from shared.kafka_topics import TopicCreator

    topics = [f"test.many.{uuid.uuid4().hex[:8]}.{i}" for i in range(20)]
    TopicCreator(stack.bootstrap_servers, 6, 1).ensure_many(topics)
    # a fresh admin client's ListOffsets: answered NOT_LEADER_FOR_PARTITION (not retried)
    # by a partition the broker has in its metadata but does not serve yet
    probe = {TopicPartition(t, p): OffsetSpec.latest() for t in topics for p in range(6)}
    admin = AdminClient({"bootstrap.servers": stack.bootstrap_servers})  # kept: its futures
    answers = admin.list_offsets(probe, request_timeout=20)
    assert {tp: f.result(timeout=30).offset for tp, f in answers.items()} == dict.fromkeys(
        probe, 0)
