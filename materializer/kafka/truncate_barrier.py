"""The driver's half of the truncate barrier: it follows `<prefix>.truncations`, and once
every raw partition's store has applied a truncation of a table, writes in one Kafka
transaction the table's truncate event (`op: t`) to every partition of its event topic,
a barrier record to every raw partition (`shared.truncate_barrier`) and a `written` record
to the truncations topic (`materializer.rules.truncate_barrier` says when and why).

In that order in the log: every event of a write the truncation removed was committed by
the task that applied it before its report (same transaction), so it sits before the
truncate event in its partition; every task writes its table's live rows again after it
meets the barrier, so whatever a consumer's truncate removed of a row written since comes
back. Under exactly-once the transactional id is the prefix's (`shared.topic_names.
truncations_transactional_id`): a job that took the prefix over fences this one's writes,
and the `written` record is committed with the events or not at all, so a driver that
dies mid-way writes them again once, never twice. Under at-least-once a repeat is
possible, as for any event.

A table whose event topic is compacted gets no truncate event (Kafka refuses a record
without a key there; a compacted mirror needs none: every row the truncation removed has
its `d` event and tombstone).
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, ConfigResource

from materializer.kafka.start_topics import raw_partitions
from materializer.rules.truncate_barrier import Due, TruncationProgress
from shared.kafka_security import client_conf, with_refusal_log
from shared.kafka_topics import TopicCreator, read_range
from shared.topic_names import truncations_topic, truncations_transactional_id
from shared.truncate_barrier import TruncateBarrier, encode_truncate_barrier

log = logging.getLogger(__name__)
TIMEOUT_S = 30.0
_DRAIN = 10_000  # records read per poll at most
# a poll of the runner's loop (each second) waits this long for a producer's
# initialisation, then leaves it to the next poll
_INIT_WAIT_S = 1.0

# A due table's truncate event: (event topic, value), or None when no version of the table
# can render one (no store holds a key of it)
Render = Callable[[Due], tuple[str, bytes] | None]


def ensure_topic(kafka: Mapping[str, str], prefix: str, replication: int) -> None:
    """Make the truncations topic (compacted, one partition) unless it exists."""
    TopicCreator(kafka, 1, replication, TIMEOUT_S).ensure(truncations_topic(prefix),
                                                          compacted=True)


class TruncateBarrierWriter:
    """Follows the truncations topic and writes each table's truncate events when due."""

    def __init__(self, kafka: Mapping[str, str], prefix: str, job_id: str,
                 raw_partitions: Mapping[str, int], transactional: bool, render: Render,
                 timeout_ms: int = 60_000) -> None:
        self.kafka, self.prefix, self.render = dict(kafka), prefix, render
        self.topic = truncations_topic(prefix)
        self.partitions = [(t, p) for t, n in raw_partitions.items() for p in range(n)]
        self.progress = TruncationProgress(job_id)
        self.tables_written = 0  # truncate events written by this writer, every poll
        self.transactional, self.timeout_ms = transactional, timeout_ms
        conf = with_refusal_log(client_conf(kafka), log)
        self._consumer = Consumer(conf | {
            "group.id": f"read-truncations-{job_id}", "enable.auto.commit": False,
            "isolation.level": "read_committed"})
        self._consumer.assign([TopicPartition(self.topic, 0, OFFSET_BEGINNING)])
        self._next = 0  # the next offset to read
        self._conf = conf
        self._producer: Producer | None = None  # transactional: once initialised
        self._starting: Producer | None = None  # one whose initialisation has not ended
        self._compacted: dict[str, bool] = {}
        self._looked = time.monotonic()  # when the raw topic's partitions were read

    def poll(self, to_end: bool = False) -> list[Due]:
        """Read what the truncations topic got since the last poll (`to_end`: all it holds
        now, waiting for it), and write the truncate events due now: what was written.
        KafkaException when Kafka fails (the next poll tries again; the transaction's
        records are written together or not at all)."""
        if self.transactional and self._producer is None:
            # First (at the start, or after a failed write): a new producer's initialisation
            # settles the last transaction under the id, and a commit whose outcome was
            # unknown (timed out) may complete then; its `written` record, read to the end
            # below, keeps the table from being due again. A poll of the runner's loop
            # waits a moment for it, not the whole timeout (the loop also watches the
            # query and the lease), and the next poll goes on with the same producer.
            if not self._initialised(TIMEOUT_S if to_end else _INIT_WAIT_S):
                return []
            to_end = True
        if to_end:
            where = TopicPartition(self.topic, 0)
            low, end = self._consumer.get_watermark_offsets(where, TIMEOUT_S)
            first = max(low, self._next)
            for msg in read_range(self._consumer, self.topic, 0, first, end, TIMEOUT_S):
                self._take(msg)
            self._consumer.assign([TopicPartition(self.topic, 0, max(first, self._next))])
        else:
            for _ in range(_DRAIN):
                msg = self._consumer.poll(0)
                if msg is None:
                    break
                if msg.error() is not None:
                    log.warning("the truncations topic could not be read",
                                extra={"topic": self.topic, "error": str(msg.error())})
                    break
                self._take(msg)
        if not self.partitions:  # no raw topic at the start: look again now and then
            self._look_for_raw_topic()
        done = []
        for due in self.progress.due(self.partitions, int(time.time() * 1000)):
            self._write(due)
            self.progress.wrote(due.written)
            done.append(due)
        self.tables_written += len(done)
        return done

    def _look_for_raw_topic(self) -> None:
        """The raw topic's partitions, if it was made since the start (every 30 s at most)."""
        now = time.monotonic()
        if now - self._looked < TIMEOUT_S:
            return
        self._looked = now
        self.partitions = [(t, p) for t, n in raw_partitions(self.kafka, self.prefix).items()
                           for p in range(n)]

    def _take(self, msg: Message) -> None:
        """One record of the truncations topic into the progress (a damaged one: logged)."""
        self._next = msg.offset() + 1
        try:
            self.progress.add(msg.key(), msg.value())
        except (ValueError, KeyError, TypeError) as exc:
            log.error("a record of the truncations topic cannot be read; left out",
                      extra={"topic": self.topic, "offset": msg.offset(), "error": str(exc)})

    def _write(self, due: Due) -> None:
        """One table's truncate events, barriers and `written` record, in one transaction."""
        w = due.written
        rendered = self.render(due)
        producer = self._producer_now()
        events: list[tuple[str, int, bytes]] = []
        if rendered is not None:
            topic, value = rendered
            if self._is_compacted(topic):
                log.info("a compacted event topic gets no truncate event; the rows the "
                         "truncation removed have their d events",
                         extra={"table": w.name, "event_topic": topic})
            else:
                count = len(producer.list_topics(topic, TIMEOUT_S).topics[topic].partitions)
                events = [(topic, p, value) for p in range(count)]
        barrier = encode_truncate_barrier(TruncateBarrier(w.table_id, w.keyspace, w.table,
                                                          w.floor_us))
        key, value = w.record()
        failed: list[str] = []

        def delivered(err: KafkaError | None, msg: Message) -> None:
            if err is not None:
                failed.append(f"{msg.topic()}[{msg.partition()}]: {err}")

        try:
            if self.transactional:
                producer.begin_transaction()
            for topic, part, event in events:
                producer.produce(topic, event, None, partition=part, on_delivery=delivered)
            if events:  # without truncate events, no rows need writing again
                for raw_topic, part in self.partitions:
                    producer.produce(raw_topic, barrier, w.table_id.bytes, partition=part,
                                     on_delivery=delivered)
            producer.produce(self.topic, value, key, on_delivery=delivered)
            if self.transactional:
                producer.commit_transaction(TIMEOUT_S)
            elif producer.flush(TIMEOUT_S) or failed:
                raise KafkaException(f"the truncate events of {w.name} were not all "
                                     f"written within {TIMEOUT_S:.0f} s: {failed[:3]}")
        except KafkaException:
            if self.transactional:
                with contextlib.suppress(KafkaException):
                    producer.abort_transaction(TIMEOUT_S)
            self._producer = None  # made again (and initialised, settling any outcome)
            raise
        log.info("truncate events written", extra={
            "table": w.name, "floor_us": w.floor_us, "event_partitions": len(events),
            "raw_partitions": len(self.partitions) if events else 0})

    def _producer_now(self) -> Producer:
        """The producer (transactional: initialised by `poll` before it writes)."""
        if self._producer is None:
            if self.transactional:
                raise RuntimeError("the truncate barrier's producer is not initialised")
            self._producer = Producer(self._producer_conf())
        return self._producer

    def _producer_conf(self) -> dict[str, Any]:
        """The producer's settings (transactional: under the prefix's own id)."""
        conf = self._conf | {"acks": "all", "enable.idempotence": True}
        if self.transactional:
            conf |= {"transactional.id": truncations_transactional_id(self.prefix),
                     "transaction.timeout.ms": self.timeout_ms}
        return conf

    def _initialised(self, wait_s: float) -> bool:
        """Make the transactional producer, or go on initialising the one made, for up to
        `wait_s`; whether it is ready (KafkaException: it cannot be, and is made again)."""
        if self._starting is None:
            self._starting = Producer(self._producer_conf())
        try:
            self._starting.init_transactions(wait_s)
        except KafkaException as exc:
            if exc.args and exc.args[0].retriable():  # (timed out: librdkafka lets it be
                return False  # called again, and keeps on with it meanwhile)
            self._starting = None
            raise
        self._producer, self._starting = self._starting, None
        return True

    def _is_compacted(self, topic: str) -> bool:
        """Whether `topic`'s cleanup policy compacts (not known: taken as not)."""
        if topic not in self._compacted:
            resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
            try:
                futures = AdminClient(self.kafka).describe_configs([resource])
                policy = futures[resource].result(TIMEOUT_S).get("cleanup.policy")
            except KafkaException as exc:  # not allowed (DESCRIBE_CONFIGS), say
                log.warning("an event topic's cleanup policy could not be read; taken as "
                            "delete", extra={"event_topic": topic, "error": str(exc)})
                policy = None
            self._compacted[topic] = policy is not None and "compact" in str(policy.value)
        return self._compacted[topic]

    def close(self) -> None:
        """Close the clients."""
        with contextlib.suppress(KafkaException, RuntimeError):
            self._consumer.close()
        if self._producer is not None:
            self._producer.flush(5)
