"""Kafka topic plumbing shared by both stages: create-if-missing, and read-to-the-end.

(The local broker, like many production ones, does not auto-create topics.)
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

from shared.kafka_security import client_conf, with_refusal_log

log = logging.getLogger(__name__)
# what a partition's broker answers while it has not taken the partition on (or moves it);
# UNKNOWN_LEADER_EPOCH: the metadata's leader epoch is newer than the one the broker applied
_NOT_SERVING_YET = (KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE,
                    KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError.REPLICA_NOT_AVAILABLE,
                    KafkaError.UNKNOWN_LEADER_EPOCH, KafkaError.FENCED_LEADER_EPOCH,
                    KafkaError._TIMED_OUT, KafkaError.REQUEST_TIMED_OUT)


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
        """Create `topic` unless it exists (a compacted one with one partition) and wait until
        it takes writes; raises KafkaException or a timeout error if Kafka does not answer."""
        self.ensure_many([topic], compacted)

    def ensure_many(self, topics: Iterable[str], compacted: bool = False,
                    partitions: Mapping[str, int] | None = None,
                    config: Mapping[str, str] | None = None) -> list[str]:
        """ensure() for many topics at once: one CreateTopics request for the missing ones,
        then one wait until every partition of each takes writes; `partitions`: a topic's
        own partition count (else the creator's, or 1 for a compacted topic); `config`:
        more topic settings. The topics this call created."""
        wanted = [t for t in dict.fromkeys(topics) if t not in self.known]
        if not wanted:
            return []
        try:
            existing = self.admin.list_topics(timeout=self.timeout_s).topics
        except KafkaException:
            self.admin.poll(0)  # serve the error callback: a refusal says why, clearly
            raise
        config = ({"cleanup.policy": "compact"} if compacted else {}) | dict(config or {})
        default = 1 if compacted else self.partitions
        new = [NewTopic(t, num_partitions=(partitions or {}).get(t, default),
                        replication_factor=self.replication, config=config)
               for t in wanted if t not in existing]
        created = []
        if new:
            for topic, future in self.admin.create_topics(new).items():
                try:
                    future.result(timeout=self.timeout_s)
                    log.info("created topic", extra={"topic": topic})
                    created.append(topic)
                except KafkaException as exc:
                    if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                        raise
        self.wait_writable(wanted)
        self.known.update(wanted)
        return created

    def wait_writable(self, topics: list[str]) -> None:
        """Block until every partition of `topics` has a leader that serves it.

        Why more than a leader in the metadata: a broker answers metadata from its cache
        before its replica manager has taken the partition on, and a produce in between gets
        NOT_LEADER_OR_FOLLOWER. An idempotent producer with several requests in flight can
        then have a later request appended first and retry the earlier one with
        OUT_OF_ORDER_SEQUENCE_NUMBER until its delivery timeout (KAFKA-15591, KAFKA-14312):
        with 20 event topics made at once this failed Spark's Kafka sink after 120 s. A
        ListOffsets request is served by the replica manager, as a produce is, so a partition
        that answers it takes writes."""
        deadline = time.monotonic() + self.timeout_s
        pending = set(topics)
        while True:
            # one topic (a worker meeting a new table): its metadata, not the whole cluster's
            meta = (self.admin.list_topics(next(iter(pending)), timeout=self.timeout_s)
                    if len(pending) == 1 else self.admin.list_topics(timeout=self.timeout_s)
                    ).topics
            probe: dict[TopicPartition, OffsetSpec] = {}
            for topic in pending:
                tm = meta.get(topic)
                if (tm is not None and tm.error is None and tm.partitions
                        and all(pm.leader >= 0 and pm.error is None
                                for pm in tm.partitions.values())):
                    probe.update({TopicPartition(topic, p): OffsetSpec.latest()
                                  for p in tm.partitions})
            not_serving: set[str] = set()
            for tp, future in (self.admin.list_offsets(probe, request_timeout=self.timeout_s)
                               .items() if probe else ()):
                try:
                    future.result(timeout=self.timeout_s)
                except KafkaException as exc:
                    if exc.args[0].code() not in _NOT_SERVING_YET:
                        raise
                    not_serving.add(tp.topic)
            pending = not_serving | (pending - {tp.topic for tp in probe})
            if not pending:
                return
            if time.monotonic() >= deadline:
                raise KafkaException(
                    f"topics not taking writes after {self.timeout_s:.0f}s (no leader serving "
                    f"their partitions): {', '.join(sorted(pending))}")
            time.sleep(0.1)


# A reader's fetch at a partition's end waits this long at the broker for data (Kafka's
# default: 500 ms), and the next partition's first fetch waits behind it on the connection
READ_FETCH_WAIT_MS = 10


def read_to_end(bootstrap: str | Mapping[str, str], topic: str, timeout_s: float = 30.0,
                start: dict[int, int] | None = None) -> Iterator[Message]:
    """Every committed record of `topic` from `start` (partition → offset; default: the
    beginning) up to the end it has now, partition by partition in offset order (read
    isolation.level=read_committed: records of aborted or open transactions are not read).
    KafkaException if the topic is missing or a record does not come within `timeout_s`."""
    consumer = Consumer(with_refusal_log(client_conf(bootstrap), log)
                        | {"group.id": f"read-{uuid.uuid4()}", "enable.auto.commit": False,
                           "isolation.level": "read_committed",
                           "fetch.wait.max.ms": READ_FETCH_WAIT_MS})
    try:
        meta = consumer.list_topics(topic, timeout=timeout_s).topics.get(topic)
        if meta is None or meta.error is not None:
            raise KafkaException(f"topic {topic} not found")
        ends = {}
        for p in meta.partitions:
            # read_committed: the high end is the last stable offset
            low, high = watermarks(consumer, TopicPartition(topic, p), timeout_s)
            first = max(low, (start or {}).get(p, low))
            if high > first:
                ends[p] = (first, high)
        for p, (first, high) in sorted(ends.items()):
            yield from read_range(consumer, topic, p, first, high, timeout_s)
    finally:
        consumer.close()


# a partition whose leader is being elected or moved (a topic just made, a broker back):
# asked again until it has one
_NO_LEADER_YET = (KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE,
                  KafkaError.UNKNOWN_TOPIC_OR_PART)


def watermarks(consumer: Consumer, tp: TopicPartition, timeout_s: float = 30.0
               ) -> tuple[int, int]:
    """A partition's low and high watermarks, asked again while it has no leader yet (for
    up to `timeout_s`); KafkaException otherwise."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return consumer.get_watermark_offsets(
                tp, timeout=max(1.0, deadline - time.monotonic()))
        except KafkaException as exc:
            if exc.args[0].code() not in _NO_LEADER_YET or time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def read_range(consumer: Consumer, topic: str, partition: int, first: int, end: int,
               timeout_s: float = 30.0) -> Iterator[Message]:
    """The records of one partition from offset `first` up to `end`, in order, read with
    `consumer` (assigned for the time). Compaction, aborted transactions and transaction
    markers leave offsets without a record: the loop goes by the consumer's position, which
    passes them, not by counts. KafkaException if nothing comes within `timeout_s`."""
    consumer.assign([TopicPartition(topic, partition, first)])
    where = [TopicPartition(topic, partition)]
    try:
        offset, last_read = first, time.monotonic()
        while offset < end:
            # consume() waits for its count or its timeout, and offsets without a record
            # (a transaction's marker ends most partitions a transactional writer wrote)
            # never make up the count: ask for no more than is left, and look at the
            # position after a short wait
            msgs = consumer.consume(min(10_000, end - offset), min(0.05, timeout_s))
            for msg in msgs:
                if msg.error():
                    raise KafkaException(msg.error())
                offset = msg.offset() + 1
                if msg.offset() < end:
                    yield msg
            position = consumer.position(where)[0].offset
            if msgs or position > offset:
                offset, last_read = max(offset, position), time.monotonic()
            elif time.monotonic() - last_read > timeout_s:
                raise KafkaException(f"timed out reading {topic}[{partition}] at {offset} "
                                     f"(of {end})")
    finally:
        consumer.unassign()
