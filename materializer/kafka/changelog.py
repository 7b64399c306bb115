"""The partition stores' changelog in Kafka: one compacted topic for the raw topic, with its
partition count, so the store of raw partition p is changelog partition p (the design of
Kafka Streams' and Samza's changelogs).

Why Kafka rather than copies of RocksDB's files on the checkpoint's filesystem: every
machine that runs a task already reaches Kafka with the job's own settings and door, a
store's writes reach it as the task makes them (so a batch's durability costs one flush, not
an upload of table files), and a store that fell behind reads only what it missed.

Name: `<prefix>.changelog.<job id>` (`shared.topic_names`). The job id is made when a
checkpoint first runs and kept beside its stores, so a new checkpoint never meets an old
one's changelog.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import (
    Consumer,
    IsolationLevel,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import OffsetSpec

from materializer.kafka.transactions import (
    DEFAULT_TIMEOUT_MS,
    PartitionTransaction,
    transaction_for,
)
from shared.kafka_security import client_conf, with_refusal_log
from shared.kafka_topics import READ_FETCH_WAIT_MS, TopicCreator, read_range
from shared.topic_names import changelog_topic, transactional_id

log = logging.getLogger(__name__)
TIMEOUT_S = 60.0
# a store's entry holds a key's row image and more: larger than an event, and RocksDB
# values have no limit of their own
MAX_RECORD_BYTES = 16 * 1024 * 1024
# tombstones stay a day (Kafka's default, set here so a broker default does not shorten it):
# the stores catch up only within half of it (partition_store.CATCH_UP_WITHIN_MS)
TOPIC_CONFIG = {"max.message.bytes": str(MAX_RECORD_BYTES),
                "delete.retention.ms": str(24 * 3600 * 1000)}


class ChangelogError(Exception):
    """A changelog write was not made durable, or a changelog could not be read."""


class Changelogs:
    """The changelog topics of one job, reached from one process (a Python worker): one
    idempotent producer and one consumer shared by every store the process opens."""

    def __init__(self, kafka: Mapping[str, str], prefix: str, job_id: str,
                 replication: int) -> None:
        self.kafka, self.prefix, self.job_id = dict(kafka), prefix, job_id
        self._creator = TopicCreator(kafka, 1, replication, TIMEOUT_S)
        conf = with_refusal_log(client_conf(kafka), log)
        self._conf = conf
        self._producer_made: Producer | None = None  # at-least-once only (see _producer)
        # read_committed: a changelog written in transactions (exactly-once delivery) holds
        # aborted attempts' writes, which a store must never take; its ends are then the
        # last stable offsets (the same as the high watermarks when nothing is open)
        self.consumer = Consumer(conf | {"group.id": f"casscade-changelog-{job_id}",
                                          "enable.auto.commit": False,
                                          "isolation.level": "read_committed",
                                          "fetch.wait.max.ms": READ_FETCH_WAIT_MS})
        self._lock = threading.Lock()
        self.delivered: dict[tuple[str, int], int] = {}  # (topic, partition) → next offset
        self.failed: dict[tuple[str, int], str] = {}

    @property
    def _producer(self) -> Producer:
        """The idempotent producer of at-least-once writes, made at first use (under
        exactly-once each store writes through its partition's transaction instead)."""
        if self._producer_made is None:
            self._producer_made = Producer(self._conf | {
                "enable.idempotence": True, "acks": "all", "linger.ms": 5,
                "compression.type": "lz4", "message.max.bytes": MAX_RECORD_BYTES})
        return self._producer_made

    def ensure(self, raw_partitions: int) -> dict[str, int]:
        """Create the changelog topic, with the raw topic's partition count, if it is
        missing, and wait until it takes writes; {its name: its partition count}."""
        counts = {changelog_topic(self.prefix, self.job_id): raw_partitions}
        self._creator.ensure_many(list(counts), compacted=True, partitions=counts,
                                  config=TOPIC_CONFIG)
        return counts

    @property
    def topic(self) -> str:
        """The job's changelog topic."""
        return changelog_topic(self.prefix, self.job_id)

    def known(self, topics: Iterable[str]) -> None:
        """Take `topics` as made and taking writes."""
        self._creator.known.update(topics)

    def partition(self, raw_topic: str, partition: int,
                  ends: Mapping[tuple[str, int], int] | None = None,
                  txn: PartitionTransaction | None = None) -> ChangelogPartition:
        """The changelog of raw partition (raw_topic, partition), its topic made if the raw
        topic did not exist when the job started; `ends`: changelog ends read for the whole
        task (`ends()`), its first end() taken from there if it is in; `txn`: written in
        that transaction (TransactionalChangelog)."""
        topic = changelog_topic(self.prefix, self.job_id)
        if topic not in self._creator.known:
            meta = self.consumer.list_topics(raw_topic, timeout=TIMEOUT_S).topics[raw_topic]
            self.ensure(len(meta.partitions))
        end = (ends or {}).get((topic, partition))
        if txn is not None:
            return TransactionalChangelog(self, topic, partition, txn, end)
        return ChangelogPartition(self, topic, partition, end)

    def ends(self, topics: Mapping[str, int]) -> dict[tuple[str, int], int]:
        """The high watermark of every partition of `topics` (name → partition count), in
        one request per broker. Why at once: a process's first look at a topic's partition
        asks for the topic's metadata first, and a task opens several stores."""
        if not topics:
            return {}
        wanted = {TopicPartition(t, p): OffsetSpec.latest()
                  for t, n in topics.items() for p in range(n)}
        ends: dict[tuple[str, int], int] = {}
        try:
            futures = self._creator.admin.list_offsets(
                wanted, isolation_level=IsolationLevel.READ_COMMITTED,
                request_timeout=TIMEOUT_S)
            for tp, future in futures.items():
                ends[(tp.topic, tp.partition)] = future.result(timeout=TIMEOUT_S).offset
        except KafkaException as exc:
            raise ChangelogError(f"the changelogs' ends could not be read from "
                                 f"{self.kafka.get('bootstrap.servers')}: {exc}") from exc
        return ends

    def _on_delivery(self, err: KafkaError | None, msg: Any) -> None:
        key = (msg.topic(), msg.partition())
        with self._lock:
            if err is not None:
                self.failed.setdefault(key, f"{err.name()}: {err.str()}")
            else:
                self.delivered[key] = max(self.delivered.get(key, 0), msg.offset() + 1)

    def write(self, topic: str, partition: int, key: bytes, value: bytes | None) -> None:
        """Queue one write for (topic, partition)."""
        while True:
            try:
                self._producer.produce(topic, value, key, partition=partition,
                                       on_delivery=self._on_delivery)
                return
            except BufferError:  # the queue is full: let deliveries drain it
                self._producer.poll(0.05)

    def flush(self) -> None:
        """Wait for every queued write's delivery report."""
        if self._producer_made is None:
            return  # nothing written through it
        left = self._producer.flush(TIMEOUT_S)
        if left:
            raise ChangelogError(f"{left} changelog writes not acknowledged by Kafka "
                                 f"({self.kafka.get('bootstrap.servers')}) in {TIMEOUT_S:.0f} s")

    def settled_end(self, topic: str, partition: int, last: int) -> int:
        """The end of a changelog partition once the transaction that wrote offset `last`
        is settled (a commit returns before the broker has written its markers, and until
        then the end a read_committed reader sees stops before it)."""
        deadline = time.monotonic() + TIMEOUT_S
        while True:
            end = self.end(topic, partition)
            if end > last:
                return end
            if time.monotonic() >= deadline:
                raise ChangelogError(f"changelog {topic}[{partition}]: a committed write at "
                                     f"offset {last} not readable after {TIMEOUT_S:.0f} s")
            time.sleep(0.002)

    def end(self, topic: str, partition: int) -> int:
        """The end of a changelog partition (its last stable offset: read_committed)."""
        try:
            return self.consumer.get_watermark_offsets(
                TopicPartition(topic, partition), timeout=TIMEOUT_S, cached=False)[1]
        except KafkaException as exc:
            raise ChangelogError(f"changelog {topic}[{partition}]: its end could not be read "
                                 f"from {self.kafka.get('bootstrap.servers')}: {exc}") from exc


class ChangelogPartition:
    """The changelog of one store (`materializer.store.partition_store.Changelog`)."""

    def __init__(self, logs: Changelogs, topic: str, partition: int,
                 end: int | None = None) -> None:
        self.logs, self.topic, self.partition = logs, topic, partition
        self._end: int | None = None
        self._known_end = end  # read for the task before this partition's first look

    def end(self) -> int:
        """The high watermark of this changelog partition."""
        if self._known_end is not None:
            self._end, self._known_end = self._known_end, None
        else:
            self._end = self.logs.end(self.topic, self.partition)
        return self._end

    def read(self, start: int) -> Iterator[tuple[bytes, bytes | None]]:
        """The committed writes from `start` to the end found by `end()`, in order."""
        end = self.end() if self._end is None else self._end
        try:
            for msg in read_range(self.logs.consumer, self.topic, self.partition, start, end,
                                  TIMEOUT_S):
                yield msg.key(), msg.value()
        except KafkaException as exc:
            raise ChangelogError(f"changelog {self.topic}[{self.partition}]: {exc}") from exc

    def write(self, key: bytes, value: bytes | None) -> None:
        """Queue one write."""
        self.logs.write(self.topic, self.partition, key, value)

    def flush(self) -> int:
        """Wait until this partition's writes are durable; the end after them."""
        self.logs.flush()
        where = (self.topic, self.partition)
        with self.logs._lock:
            failed = self.logs.failed.pop(where, None)
            end = self.logs.delivered.get(where)
        if failed is not None:
            raise ChangelogError(f"changelog {self.topic}[{self.partition}]: a write was "
                                 f"refused: {failed}")
        return end if end is not None else self.end()

    def abort(self) -> int | None:
        """After a failed attempt: what it wrote stays (a replay rolls it back by the store's
        batch rule), so it is made durable like a success's; the end after it."""
        return self.flush()


class TransactionalChangelog(ChangelogPartition):
    """The changelog of one store written in its raw partition's transaction
    (`materializer.kafka.transactions`): the store's writes become durable, with the
    partition's events, when the transaction commits."""

    def __init__(self, logs: Changelogs, topic: str, partition: int,
                 txn: PartitionTransaction, end: int | None = None) -> None:
        super().__init__(logs, topic, partition, end)
        self.txn = txn

    def write(self, key: bytes, value: bytes | None) -> None:
        """Write one store write in the open transaction."""
        self.txn.produce(self.topic, key, value, self.partition)

    def flush(self) -> int:
        """Commit the transaction (its events too); the changelog's end after it, once
        readable."""
        last = self.txn.commit().get((self.topic, self.partition))
        if last is None:  # nothing written: the end read at the store's open stands
            end = self.end() if self._end is None else self._end
        else:
            end = self.logs.settled_end(self.topic, self.partition, last)
        self.txn.changelog_end = end
        return end

    def abort(self) -> int | None:
        """Abort the transaction: nothing of this attempt is visible, and the store, whose
        local writes are not, has no mark (it is rebuilt at its next open)."""
        self.txn.abort()
        return None


_PROCESS: dict[tuple[Any, ...], Changelogs] = {}


@dataclass(frozen=True)
class ChangelogJob:
    """What a task needs to reach one job's changelogs (pickled to the executors)."""

    kafka: Mapping[str, str]
    prefix: str
    job_id: str
    replication: int
    # the changelog topic the driver made at start, with its partition count: a worker takes
    # it as made, and a task reads all its partitions' ends at once (Changelogs.ends)
    made: Mapping[str, int] = field(default_factory=dict)
    # exactly-once: each raw partition's events and changelog writes in one transaction
    # (events.delivery); `producer`: the user's kafka.producer settings for its producers
    transactional: bool = False
    producer: Mapping[str, str] = field(default_factory=dict)
    transaction_timeout_ms: int = DEFAULT_TIMEOUT_MS  # events.transaction_timeout_s

    def transaction(self, raw_topic: str, partition: int, owner_file: Path,
                    changelog_end: int | None = None) -> tuple[PartitionTransaction, bool]:
        """This process's transactional producer of raw partition (raw_topic, partition),
        and whether it was made now (`transactions.transaction_for`; `changelog_end`: the
        partition's changelog end read at the task's start)."""
        return transaction_for(self.kafka, self.producer,
                               transactional_id(self.prefix, raw_topic, partition),
                               owner_file, self.transaction_timeout_ms, changelog_end)

    def changelogs(self) -> Changelogs:
        """This process's Changelogs of the job (a Python worker runs many tasks, and keeps
        one producer and one consumer for them all)."""
        key = (tuple(sorted(self.kafka.items())), self.prefix, self.job_id, self.replication)
        logs = _PROCESS.get(key)
        if logs is None:
            logs = _PROCESS[key] = Changelogs(self.kafka, self.prefix, self.job_id,
                                              self.replication)
            logs.known(self.made)
        return logs
