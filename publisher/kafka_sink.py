"""Kafka side of the publisher: topics, the schema topic, and acknowledged produce."""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from confluent_kafka import KafkaException, Producer

from shared import topic_names
from shared.kafka_security import client_conf, with_refusal_log
from shared.kafka_topics import TopicCreator
from shared.metrics import Registry
from shared.schema import TableSchema

log = logging.getLogger(__name__)


class SinkStopped(Exception):
    """The agent is stopping while the sink waits for Kafka (away, or refusing us)."""


def schema_record(table: TableSchema) -> bytes:
    """The schema topic value: the table as the publisher decoded it (shared/schema.py)."""
    body = table.to_json() | {"schema_hash": table.schema_hash,
                              "altered_at": table.altered_at_us,
                              "types": {k: [list(f) for f in v]
                                        for k, v in sorted(table.udts.items())}}
    return json.dumps(body, sort_keys=True).encode()


class KafkaSink:
    """Produces with acks=all and idempotence; never drops a record, however long Kafka is
    away: a full local queue makes `produce` wait (and the reader with it)."""

    def __init__(self, bootstrap: str | Mapping[str, str], prefix: str, partitions: int,
                 replication: int,
                 producer_config: dict[str, str], metrics: Registry) -> None:
        self.prefix = prefix
        self.partitions = partitions
        self.replication = replication
        conf = client_conf(bootstrap) | {
            "acks": "all", "enable.idempotence": True,
            "compression.type": "lz4", "linger.ms": 20, "batch.size": 1_000_000,
            "queue.buffering.max.messages": 200_000, "queue.buffering.max.kbytes": 262_144,
            # Never give up on a record: retry until Kafka is back (at-least-once).
            "message.timeout.ms": 0, "retries": 2**31 - 1,
        }
        conf.update(producer_config)
        self.producer = Producer(with_refusal_log(conf, log))
        # set when the agent stops: every wait for Kafka gives up (SinkStopped), so a
        # SIGTERM while Kafka is away or refusing us still saves progress and exits
        self.stopping = threading.Event()
        self.topics = TopicCreator(bootstrap, partitions, replication)
        self.published_hashes: set[str] = set()
        self.produced = metrics.counter("casscade_publisher_records_produced_total",
                                        "RowUpdate records handed to the Kafka producer")
        self.errors = metrics.counter("casscade_publisher_errors_total",
                                      "Errors by kind", ("kind",))
        self.waiting = metrics.gauge("casscade_publisher_kafka_waiting",
                                     "1 while produce waits for a full queue to drain")
        # when a wait for Kafka last went round: a wait is the agent alive, not stuck
        # (/health: a Kafka outage must not get the agent, or a pod beside Cassandra,
        # restarted)
        self.alive_at = time.monotonic()

    # ---- topics -----------------------------------------------------------------------------
    def ensure_topic(self, topic: str, compacted: bool = False) -> None:
        """Create `topic` if missing (waits, retrying, until Kafka answers)."""
        backoff = 0.5
        while True:
            try:
                self.topics.ensure(topic, compacted)
                return
            except Exception as exc:  # noqa: BLE001 — Kafka away, metadata timeouts: retry
                self._kafka_down("create_topic", exc, backoff)
                backoff = min(backoff * 2, 10)
                self._check_stopping()

    def ensure_schema(self, table: TableSchema) -> None:
        """Publish the table's schema to the schema topic and wait for its ack, once."""
        digest = table.schema_hash
        if digest in self.published_hashes:
            return
        topic = topic_names.schema_topic(self.prefix)
        self.ensure_topic(topic, compacted=True)
        result: list[Any] = []
        self.produce(topic, digest.encode(), schema_record(table),
                     lambda err, _msg: result.append(err))
        while not result:
            self.producer.poll(0.1)
            self._check_stopping()
        if result[0] is not None:
            raise KafkaException(result[0])
        self.published_hashes.add(digest)

    # ---- records ----------------------------------------------------------------------------
    def produce(self, topic: str, key: bytes, value: bytes,
                on_delivery: Callable[[Any, Any], None], counted: bool = False,
                partition: int = -1) -> None:
        """Hand one record to the producer; waits while the local queue is full.
        `counted`: the caller counts produced records itself; `partition`: -1 for the
        partitioner's choice by key."""
        try:
            self.producer.produce(topic, value=value, key=key, partition=partition,
                                  on_delivery=on_delivery)
        except BufferError:
            # The local queue is full (Kafka slow or away): serve callbacks until it drains.
            self.waiting.set(1)
            while True:
                self.producer.poll(0.1)
                try:
                    self.producer.produce(topic, value=value, key=key, partition=partition,
                                          on_delivery=on_delivery)
                    break
                except BufferError:
                    self._check_stopping()
            self.waiting.set(0)
        if not counted:
            self.produced.inc()

    def ensure_raw_topic(self) -> str:
        """Make sure the raw topic exists (created with `partitions` if missing); its name."""
        topic = topic_names.raw_topic(self.prefix)
        self.ensure_topic(topic)
        return topic

    def raw_partitions(self) -> int:
        """The raw topic's partition count (0 while it does not exist)."""
        topic = topic_names.raw_topic(self.prefix)
        meta = self.topics.admin.list_topics(topic, timeout=self.topics.timeout_s)
        found = meta.topics.get(topic)
        return 0 if found is None or found.error is not None else len(found.partitions)

    def raw_topic_made(self) -> bool:
        """Whether this sink has made sure of the raw topic (created, or found)."""
        return topic_names.raw_topic(self.prefix) in self.topics.known

    def poll(self, timeout: float = 0.0) -> int:
        """Serve delivery callbacks."""
        return self.producer.poll(timeout)

    def in_flight(self) -> int:
        """Records handed over but not yet acknowledged."""
        return len(self.producer)

    def flush(self, timeout: float) -> int:
        """Wait up to `timeout` for every record; returns how many are still in flight."""
        return self.producer.flush(timeout)

    def _kafka_down(self, what: str, exc: Exception, backoff: float) -> None:
        self.errors.inc(1, "kafka_unavailable")
        log.warning("Kafka unavailable, retrying", extra={"op": what, "error": str(exc),
                                                          "retry_in_s": backoff})
        self.stopping.wait(backoff)

    def _check_stopping(self) -> None:
        """Called at every turn of a wait for Kafka: notes the wait alive; SinkStopped when
        the agent stops."""
        self.alive_at = time.monotonic()
        if self.stopping.is_set():
            raise SinkStopped("stopping while waiting for Kafka")


def to_every_raw_partition(sink: KafkaSink, key: bytes, value: bytes,
                           on_delivery: Callable[[Any, Any], None], partitions: int) -> int:
    """Hand one record to each of the raw topic's `partitions` partitions (what every task of
    the materializer must meet: heartbeats, table-dropped and table-truncated records); how
    many records that was."""
    topic = topic_names.raw_topic(sink.prefix)
    for p in range(partitions):
        sink.produce(topic, key, value, on_delivery, counted=True, partition=p)
    return partitions
