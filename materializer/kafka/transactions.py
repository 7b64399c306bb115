"""Exactly-once delivery: one Kafka transaction per raw partition and micro-batch, holding
the partition's events, its store's changelog writes and the record of the raw offsets it
consumed (`materializer.store.consumed_offsets`), committed together or not at all
(docs/architecture.md "Exactly once").

The transactional id is per job and raw partition (`shared.topic_names.transactional_id`),
so the producer of a new attempt at a partition (a retried task, a restarted job, an
executor that took the partition over) fences every earlier one: Kafka refuses a zombie's
writes and commit from the moment the new one has initialised. An initialisation also
finishes the earlier holder's open transaction (aborted), so what the new attempt then reads
of the changelog is final.

A Python worker keeps its producers between micro-batches (an initialisation costs a round
trip to the transaction coordinator, 60 ms to 0.5 s here). A cached producer may have been
fenced since by another process that ran the partition: each producer writes a token of its
own to an owner file beside the partition's store, and a task whose cached producer's token
is not the one there makes a new producer before it reads anything. (On a cluster another
executor keeps its own stores and owner files: there a fenced producer is found at commit,
and the task fails and is retried, which Spark does.)
"""

from __future__ import annotations

import contextlib
import logging
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Producer

from shared.kafka_security import client_conf, with_refusal_log

log = logging.getLogger(__name__)
TIMEOUT_S = 60.0
MAX_RECORD_BYTES = 16 * 1024 * 1024  # as the changelog's (a store entry can be large)
# How long the broker lets a transaction stay open before it aborts it: the longest
# micro-batch a task may run (kafka.max_offsets_per_trigger bounds a batch). An attempt that
# dies leaves its transaction open this long at most (read_committed consumers of the
# partitions it wrote wait that long) unless the next attempt at its partition comes first,
# which aborts it at once. The broker's transaction.max.timeout.ms (15 min by default)
# must allow it.
TRANSACTION_TIMEOUT_MS = 300_000


class TransactionFailed(Exception):
    """A partition's transaction could not commit: nothing of it is visible to
    read_committed consumers."""


class PartitionTransaction:
    """The transactional producer of one raw partition of one job, reused batch after batch
    by the Python worker that made it: one transaction at a time."""

    def __init__(self, conf: Mapping[str, str], transactional_id: str) -> None:
        self.transactional_id = transactional_id
        self.token = uuid.uuid4().hex  # what the owner file holds while this one is newest
        self.broken = False  # fenced or fatally failed: the process makes a new one
        self._open = False
        self.delivered: dict[tuple[str, int], int] = {}  # (topic, partition) → last offset
        self._failed: str | None = None
        self._producer = Producer(dict(conf) | {
            "transactional.id": transactional_id,
            "transaction.timeout.ms": TRANSACTION_TIMEOUT_MS,
            "enable.idempotence": True, "acks": "all", "linger.ms": 5,
            "compression.type": "lz4", "message.max.bytes": MAX_RECORD_BYTES})
        try:
            self._producer.init_transactions(TIMEOUT_S)
        except KafkaException as exc:
            raise TransactionFailed(f"transactional id {transactional_id}: the producer "
                                    f"could not initialise: {exc}") from exc

    def _on_delivery(self, err: KafkaError | None, msg: Any) -> None:
        # (librdkafka calls it from poll() and flush(), in the producing thread)
        if err is not None:
            if self._failed is None:
                self._failed = f"{msg.topic()}[{msg.partition()}]: {err.name()}: {err.str()}"
        else:
            key = (msg.topic(), msg.partition())
            self.delivered[key] = max(self.delivered.get(key, -1), msg.offset())

    def produce(self, topic: str, key: bytes | None, value: bytes | None,
                partition: int | None = None) -> None:
        """Write one record in the open transaction (begun by the first write); a record
        for a given `partition` (a changelog write) has its offset kept in `delivered`."""
        if not self._open:
            self._begin()
        # an event needs no report of its own (a failed write fails the commit), and a
        # Python call per record costs; a changelog write's offset makes the store's mark
        kwargs: dict[str, Any] = {}
        if partition is not None:
            kwargs["partition"] = partition
            kwargs["on_delivery"] = self._on_delivery
        while True:
            try:
                self._producer.produce(topic, value, key, **kwargs)
                return
            except BufferError:  # the queue is full: let deliveries drain it
                self._producer.poll(0.05)
            except KafkaException as exc:
                self._fail(exc, "a write was refused")

    def _begin(self) -> None:
        self.delivered = {}
        self._failed = None
        try:
            self._producer.begin_transaction()
        except KafkaException as exc:
            self._fail(exc, "the transaction could not begin")
        self._open = True

    def commit(self) -> dict[tuple[str, int], int]:
        """Commit the open transaction (none: nothing to do); the last offset written to
        each partition given to `produce`. TransactionFailed if it did not commit (then it is
        aborted, or the producer fenced: nothing of it becomes visible)."""
        if not self._open:
            return {}
        deadline = time.monotonic() + TIMEOUT_S
        while True:
            try:
                self._producer.commit_transaction(max(1.0, deadline - time.monotonic()))
                break
            except KafkaException as exc:
                if exc.args[0].retriable() and time.monotonic() < deadline:
                    continue  # librdkafka: call it again to wait for the outcome
                self._fail(exc, "the commit failed")
        self._open = False
        if self._failed is not None:  # librdkafka fails the commit first; belt and braces
            raise TransactionFailed(f"{self.transactional_id}: a write failed: "
                                    f"{self._failed}")
        return dict(self.delivered)

    def abort(self) -> None:
        """Abort the open transaction, if any (a fenced producer's is aborted by its
        successor: nothing to do)."""
        if not self._open or self.broken:
            self._open = False
            return
        self._open = False
        try:
            self._producer.abort_transaction(TIMEOUT_S)
        except KafkaException as exc:  # the next attempt's initialisation aborts it anyway
            self.broken = True
            log.warning("a transaction could not be aborted; the next attempt at its "
                        "partition aborts it", extra={"transactional_id": self.transactional_id,
                                                       "error": str(exc)})

    def _fail(self, exc: KafkaException, what: str) -> None:
        """Abort what can be aborted, mark the producer broken if Kafka says so, and raise."""
        err = exc.args[0]
        fenced = err.fatal() or err.code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED,
                                               KafkaError.INVALID_PRODUCER_EPOCH)
        if fenced:
            self.broken = True
        elif err.txn_requires_abort():
            with contextlib.suppress(KafkaException):
                self._producer.abort_transaction(TIMEOUT_S)
        self._open = False
        reason = ("another attempt at this partition took over (fenced)" if fenced
                  else str(err))
        raise TransactionFailed(f"transactional id {self.transactional_id}: {what}: "
                                f"{reason}") from exc

    def close(self) -> None:
        """Let go of the producer (an open transaction is aborted by the next holder)."""
        self._producer.flush(0)


_PROCESS: dict[str, PartitionTransaction] = {}


def transaction_for(kafka: Mapping[str, str], producer: Mapping[str, str],
                    transactional_id: str, owner_file: Path) -> tuple[PartitionTransaction, bool]:
    """This process's producer for `transactional_id`, new if it has none, a broken one,
    or one another process may have fenced since (the owner file holds another token); and
    whether it is new (initialised now: what was committed under the id before is final)."""
    txn = _PROCESS.get(transactional_id)
    try:
        owner = owner_file.read_text()
    except OSError:
        owner = None
    if txn is not None and not txn.broken and owner == txn.token:
        return txn, False
    if txn is not None:
        txn.close()
    conf = with_refusal_log(client_conf(kafka), log) | dict(producer)
    txn = _PROCESS[transactional_id] = PartitionTransaction(conf, transactional_id)
    owner_file.parent.mkdir(parents=True, exist_ok=True)
    owner_file.write_text(txn.token)
    return txn, True
