"""How the exactly-once producer sends a transaction's events: what a task writes to a
partition while it merges waits for the commit in one batch (not a request every few
milliseconds), and a full queue sends what waits instead of waiting for it."""

from __future__ import annotations

import json
import time

import pytest

from materializer.kafka.transactions import LINGER_MS, PartitionTransaction
from shared.kafka_topics import read_to_end

from support.kafka_topics import make_topic

pytestmark = pytest.mark.integration
TOPICS = 8


def test_a_partitions_events_written_over_a_merge_go_in_one_batch(stack) -> None:
    """Events written a few at a time over 0.8 s, as a task merging many tables' keys
    writes them: each topic's arrive in one batch at the commit (librdkafka's statistics)."""
    topics = [make_topic(stack.bootstrap_servers, partitions=1) for _ in range(TOPICS)]
    reports: list[dict] = []
    txn = PartitionTransaction({"bootstrap.servers": stack.bootstrap_servers,
                                "statistics.interval.ms": 100,
                                "stats_cb": lambda doc: reports.append(json.loads(doc))},
                               f"casscade.test.batching.{topics[0]}")
    try:
        for round_ in range(40):  # 40 rounds 20 ms apart: 5 ms of lingering sent each
            for topic in topics:
                txn.produce(topic, f"k{round_}".encode(), b"{}")
            time.sleep(0.02)
        txn.commit()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not _batches(reports, topics):
            txn._producer.poll(0.2)  # (the statistics come through poll)
    finally:
        txn.close()
    assert _batches(reports, topics) == dict.fromkeys(topics, 1)
    assert all(sum(1 for _ in read_to_end(stack.bootstrap_servers, t)) == 40 for t in topics)


def _batches(reports: list[dict], topics: list[str]) -> dict[str, int] | None:
    """Batches sent per topic in the last statistics report that has every topic sent."""
    for doc in reversed(reports):
        sent = {t: doc.get("topics", {}).get(t, {}).get("batchcnt", {}).get("cnt", 0)
                for t in topics}
        if all(sent.values()):
            return sent
    return None


def test_a_full_queue_sends_what_waits(stack) -> None:
    """More events than the producer's queue holds: each full queue is sent at once, not
    after the linger, and every event commits."""
    topics = [make_topic(stack.bootstrap_servers, partitions=1) for _ in range(TOPICS)]
    txn = PartitionTransaction({"bootstrap.servers": stack.bootstrap_servers,
                                "queue.buffering.max.messages": 100},
                               f"casscade.test.full.{topics[0]}")
    started = time.monotonic()
    try:
        for n in range(2_000):
            txn.produce(topics[n % TOPICS], f"k{n}".encode(), b"{}")
        txn.commit()
    finally:
        txn.close()
    took = time.monotonic() - started
    assert took < LINGER_MS / 1000 / 2, took  # 20 full queues: none waited for the linger
    assert sum(sum(1 for _ in read_to_end(stack.bootstrap_servers, t)) for t in topics) == 2_000


def test_a_users_short_delivery_timeout_still_makes_a_producer(stack) -> None:
    """`kafka.producer` with delivery.timeout.ms at LINGER_MS: librdkafka takes the producer
    (it refuses a linger that is not under the message timeout) and its events commit."""
    topic = make_topic(stack.bootstrap_servers, partitions=1)
    txn = PartitionTransaction({"bootstrap.servers": stack.bootstrap_servers,
                                "delivery.timeout.ms": str(LINGER_MS)},
                               f"casscade.test.timeout.{topic}")
    try:
        txn.produce(topic, b"k", b"{}")
        txn.commit()
    finally:
        txn.close()
    assert sum(1 for _ in read_to_end(stack.bootstrap_servers, topic)) == 1
