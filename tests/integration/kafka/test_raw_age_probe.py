"""The driver's raw-age probe against a real broker: the raw topic's retention as the broker
has it, and the append time of the first record past the job's read position."""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import Producer

from materializer.kafka.raw_age import RawAgeProbe
from shared.kafka_topics import TopicCreator

from support.services import wait_until

pytestmark = pytest.mark.integration


def test_the_oldest_unread_record_and_the_retention_read_back(stack) -> None:
    topic = f"age{uuid.uuid4().hex[:6]}.raw"
    TopicCreator(stack.bootstrap_servers, 2, 1).ensure_many([topic],
                                                  config={"retention.ms": "7200000"})
    producer = Producer({"bootstrap.servers": stack.bootstrap_servers})
    now_ms = int(time.time() * 1000)
    # partition 0: records appended 300 s and 100 s ago; partition 1: one 30 s ago
    for partition, age_s in ((0, 300), (0, 100), (1, 30)):
        producer.produce(topic, value=b"x", partition=partition,
                         timestamp=now_ms - age_s * 1000)
    assert producer.flush(30) == 0
    probe = RawAgeProbe({"bootstrap.servers": stack.bootstrap_servers}, topic,
                        interval_s=0.2)
    try:
        retention_s, age_s = probe.read({0: 0, 1: 0})  # nothing read yet
        assert retention_s == 7200 and 299 <= age_s < 330, age_s
        _, age_s = probe.read({0: 1, 1: 0})  # the oldest read: the next one is 100 s old
        assert 99 <= age_s < 130, age_s
        _, age_s = probe.read({0: 2, 1: 0})
        assert 29 <= age_s < 60, age_s
        assert probe.read({0: 2, 1: 1}) == (7200, 0.0)  # everything read
        # on its thread, at the position it is given
        probe.start(lambda: {0: 1, 1: 1})
        latest = wait_until(probe.latest, 30, "the probe's first reading", interval_s=0.1)
        assert latest is not None and latest[0] == 7200 and 99 <= latest[1] < 140, latest
    finally:
        probe.close()
    # Kafka away: no reading, no exception (the scrape goes on with the last one)
    away = RawAgeProbe({"bootstrap.servers": "127.0.0.1:1", "socket.timeout.ms": "1000"},
                       topic)
    try:
        assert away.read({0: 0}) is None
    finally:
        away.close()
