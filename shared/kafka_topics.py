"""Kafka topic plumbing shared by both stages: create-if-missing, and read-to-the-end.

(The local broker, like many production ones, does not auto-create topics.)
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Iterator, Mapping

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from shared.kafka_security import client_conf, with_refusal_log

log = logging.getLogger(__name__)


class TopicCreator:
    """Creates topics once each, if missing; remembers what exists."""

    def __init__(self, bootstrap: str | Mapping[str, str], partitions: int, replication: int,
                 timeout_s: float = 30.0) -> None:
        self.admin = AdminClient(with_refusal_log(client_conf(bootstrap), log))
        self.partitions = partitions
        self.replication = replication
        self.timeout_s = timeout_s
        self.known: set[str] = set()

    def ensure(self, topic: str, compacted: bool = False) -> None:
        """Create `topic` unless it exists (a compacted one with one partition); raises
        KafkaException or a timeout error if Kafka does not answer."""
        if topic in self.known:
            return
        try:
            existing = self.admin.list_topics(timeout=self.timeout_s).topics
        except KafkaException:
            self.admin.poll(0)  # serve the error callback: a refusal says why, clearly
            raise
        if topic not in existing:
            config = {"cleanup.policy": "compact"} if compacted else {}
            future = self.admin.create_topics([NewTopic(
                topic, num_partitions=1 if compacted else self.partitions,
                replication_factor=self.replication, config=config)])[topic]
            try:
                future.result(timeout=self.timeout_s)
                log.info("created topic", extra={"topic": topic})
            except KafkaException as exc:
                if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                    raise
        self.wait_for_leaders(topic)
        self.known.add(topic)

    def wait_for_leaders(self, topic: str) -> None:
        """Block until every partition of `topic` has a leader in the metadata: a producer
        writing to a topic created a moment ago otherwise meets NOT_LEADER_OR_FOLLOWER (with
        many topics created at once this lasted minutes and failed Spark's Kafka sink)."""
        deadline = time.monotonic() + self.timeout_s
        missing: list[int] = []
        while True:
            meta = self.admin.list_topics(topic, timeout=self.timeout_s).topics.get(topic)
            if meta is not None and meta.error is None and meta.partitions:
                missing = [p for p, pm in meta.partitions.items()
                           if pm.leader < 0 or pm.error is not None]
                if not missing:
                    return
            if time.monotonic() >= deadline:
                raise KafkaException(f"topic {topic}: partitions {missing or 'all'} have no "
                                     f"leader after {self.timeout_s:.0f}s")
            time.sleep(0.1)


def read_to_end(bootstrap: str | Mapping[str, str], topic: str, timeout_s: float = 30.0,
                start: dict[int, int] | None = None) -> Iterator[Message]:
    """Every record of `topic` from `start` (partition → offset; default: the beginning) up
    to the end it has now, partition by partition in offset order. KafkaException if the
    topic is missing or a record does not come within `timeout_s`."""
    consumer = Consumer(with_refusal_log(client_conf(bootstrap), log)
                        | {"group.id": f"read-{uuid.uuid4()}", "enable.auto.commit": False})
    try:
        meta = consumer.list_topics(topic, timeout=timeout_s).topics.get(topic)
        if meta is None or meta.error is not None:
            raise KafkaException(f"topic {topic} not found")
        ends = {}
        for p in meta.partitions:
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, p),
                                                       timeout=timeout_s)
            first = max(low, (start or {}).get(p, low))
            if high > first:
                ends[p] = (first, high)
        for p, (first, high) in sorted(ends.items()):
            consumer.assign([TopicPartition(topic, p, first)])
            offset = first
            while offset < high:  # compaction may leave gaps: go by offsets, not counts
                msg = consumer.poll(timeout_s)
                if msg is None:
                    raise KafkaException(f"timed out reading {topic}[{p}] at {offset}")
                if msg.error():
                    raise KafkaException(msg.error())
                offset = msg.offset() + 1
                yield msg
    finally:
        consumer.close()
