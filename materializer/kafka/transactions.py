"""Exactly-once delivery: one Kafka transaction per raw partition and micro-batch, holding
the partition's events, its store's changelog writes and the record of the raw offsets it
consumed (`materializer.store.consumed_offsets`), committed together or not at all
(docs/architecture.md "Exactly once").

The transactional id is per topic prefix and raw partition (`shared.topic_names.
transactional_id`), so the producer of a new attempt at a partition (a retried task, a
restarted job, an executor that took the partition over, another job on the prefix)
fences every earlier one: Kafka refuses a zombie's
writes and commit from the moment the new one has initialised. An initialisation also
finishes the earlier holder's open transaction (aborted), so what the new attempt then reads
of the changelog is final.

A Python worker keeps its producers between micro-batches (an initialisation costs round
trips to the transaction coordinator: a few ms here, sometimes 0.5 s right after another
producer's commit under the id, when librdkafka retries). A cached producer may have been
fenced since by another process that ran the partition, which a task finds before it reads
anything, and then makes a new producer: on this machine, each producer writes a token of
its own to an owner file beside the partition's store, and the file holds another; on
another machine (a cluster's executor that had the partition for a while), that process
committed to the partition's changelog, whose end is then past the one this producer's
last commit left. (A process elsewhere that initialised and never committed is not seen:
then the fenced producer's commit fails, and the task is retried.)
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
# events.transaction_timeout_s's default, for callers that are given none (tests, tools)
DEFAULT_TIMEOUT_MS = 300_000
EVENT_PARTITIONER = "murmur2_random"  # Java's: murmur2 of the key (keyless: any partition)
# How long a partition's records wait for more before they are sent. Nothing of a
# transaction is visible before its commit, which sends whatever waits at once, so waiting
# costs no latency; and librdkafka sends a produce request per partition: a task that
# spreads its events over many tables' topics, sending every 5 ms, sent about one request
# per event (docs/architecture.md, "What a transaction costs the broker"). A full batch
# (batch.size, batch.num.messages) goes at once whatever this says; `linger_ms` keeps it
# under the message timeout.
LINGER_MS = 30_000
# What may wait in a producer's queue, in KiB: past it a write sends what waits and
# waits for room (`produce`), which bounds a task's memory when its events wait
QUEUE_KIB = 128 * 1024


def linger_ms(conf: Mapping[str, str], timeout_ms: int) -> int:
    """LINGER_MS, or half the message timeout if that is less: librdkafka refuses a linger
    that is not under it, and the message timeout is the transaction timeout or less (a
    `kafka.producer` setting: message.timeout.ms, or its alias delivery.timeout.ms; 0 is
    none)."""
    set_ms = [int(conf.get(k) or 0) for k in ("message.timeout.ms", "delivery.timeout.ms")]
    return max(1, min(LINGER_MS, min([timeout_ms, *(t for t in set_ms if t > 0)]) // 2))


def producer_conf(conf: Mapping[str, str], transactional_id: str, timeout_ms: int
                  ) -> dict[str, Any]:
    """A partition's transactional producer's librdkafka settings: the job's defaults,
    `conf` (its client settings and `kafka.producer`) over them, and what exactly-once
    needs over both (its transactional id and timeout, idempotence, acks=all)."""
    defaults = {
        # a key's partition as the Java client puts it (Spark's sink under at-least-once,
        # Kafka Streams, Flink): murmur2, not librdkafka's CRC-32 default
        "partitioner": EVENT_PARTITIONER,
        # connected to every broker from the start: with connections made only when
        # needed, the initialisation waited for one (about 50 ms here), and 1 in 15
        # times missed it and retried 500 ms later; now it takes a few ms
        "enable.sparse.connections": False,
        "linger.ms": linger_ms(conf, timeout_ms),
        "queue.buffering.max.kbytes": QUEUE_KIB,
        "compression.type": "lz4", "message.max.bytes": MAX_RECORD_BYTES}
    return defaults | dict(conf) | {
        "transactional.id": transactional_id,
        # (events.transaction_timeout_s, which the start checked against the brokers)
        "transaction.timeout.ms": timeout_ms,
        "enable.idempotence": True, "acks": "all"}


class ProducerRefused(ValueError):
    """librdkafka refuses the event producers' settings (`kafka.producer`)."""


def producer_settings(kafka: Mapping[str, str], producer: Mapping[str, str]
                      ) -> dict[str, Any]:
    """The event producers' client settings: the job's Kafka client settings, `kafka.
    producer` over them (what `producer_conf` then completes)."""
    return client_conf(kafka) | dict(producer)


def check_producer(kafka: Mapping[str, str], producer: Mapping[str, str], timeout_ms: int
                   ) -> None:
    """ProducerRefused if librdkafka will not make a partition's transactional producer
    from these settings (an unknown or conflicting `kafka.producer` setting), found before
    Spark starts instead of failing every task (made and dropped at once)."""
    conf = producer_conf(producer_settings(kafka, producer), "casscade-settings-check",
                         timeout_ms)
    try:
        Producer(conf)
    except KafkaException as exc:
        err = exc.args[0]
        said = err.str() if isinstance(err, KafkaError) else str(err)
        raise ProducerRefused(f"kafka.producer: the Kafka client refuses the event "
                              f"producers' settings: {said}") from None


class TransactionFailed(Exception):
    """A partition's transaction did not commit here: it was aborted (nothing of it is
    visible to read_committed consumers), or its outcome is unknown (the commit request
    timed out or its connection failed: the coordinator may have taken it). The task
    fails either way; the next attempt's producer initialises under the same
    transactional id, which settles an unknown outcome before the attempt reads anything:
    a commit the coordinator took completes (the attempt finds the batch recorded in the
    store and writes nothing again), any other is aborted (the attempt writes the
    partition's batch)."""


def is_fenced(exc: KafkaException) -> bool:
    """Whether a transactional producer's error means it is done for: fenced by a newer
    producer of its transactional id, or fatally failed."""
    err = exc.args[0]
    return bool(err.fatal()) or err.code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED,
                                               KafkaError.INVALID_PRODUCER_EPOCH)


class PartitionTransaction:
    """The transactional producer of one raw partition of one job, reused batch after batch
    by the Python worker that made it: one transaction at a time."""

    def __init__(self, conf: Mapping[str, str], transactional_id: str,
                 timeout_ms: int = DEFAULT_TIMEOUT_MS) -> None:
        self.transactional_id = transactional_id
        self.token = uuid.uuid4().hex  # what the owner file holds while this one is newest
        # fenced, fatally failed, or left in a transaction it could not abort or whose
        # commit outcome is unknown: the process makes a new one (`_fail`)
        self.broken = False
        self._open = False
        self.delivered: dict[tuple[str, int], int] = {}  # (topic, partition) → last offset
        # its partition's changelog end after this producer's last commit: an end past it
        # means another producer committed since, and so fenced this one
        self.changelog_end: int | None = None
        self._failed: str | None = None
        self.topics: set[str] = set()  # written in the open (or last) transaction
        started = time.monotonic()
        self._producer = Producer(producer_conf(conf, transactional_id, timeout_ms))
        try:
            self._producer.init_transactions(TIMEOUT_S)
        except KafkaException as exc:
            raise TransactionFailed(f"transactional id {transactional_id}: the producer "
                                    f"could not initialise: {exc}") from exc
        self.init_s = time.monotonic() - started  # a round trip to the coordinator and more

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
        self.topics.add(topic)
        if partition is not None:
            kwargs["partition"] = partition
            kwargs["on_delivery"] = self._on_delivery
        while True:
            try:
                self._producer.produce(topic, value, key, **kwargs)
                return
            except BufferError:  # the queue is full: send what waits (past LINGER_MS)
                self._producer.flush(0.05)
            except KafkaException as exc:
                self._fail(exc, "a write was refused")

    def _begin(self) -> None:
        self.delivered = {}
        self._failed = None
        self.topics = set()
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
        started = time.monotonic()
        deadline = started + TIMEOUT_S
        while True:
            try:
                self._producer.commit_transaction(max(1.0, deadline - time.monotonic()))
                break
            except KafkaException as exc:
                if exc.args[0].retriable() and time.monotonic() < deadline:
                    continue  # librdkafka: call it again to wait for the outcome
                self._fail(exc, "the commit failed")
        _UNREPORTED.append((time.monotonic() - started, len(self.topics)))
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
        """Abort what can be aborted; the producer stays fit for another transaction only
        if its own was aborted; raise."""
        err = exc.args[0]
        fenced = is_fenced(exc)
        aborted = False
        if not fenced and err.txn_requires_abort():
            with contextlib.suppress(KafkaException):
                self._producer.abort_transaction(TIMEOUT_S)
                aborted = True
        # Any other end leaves the producer unfit: fenced or fatal; or a commit whose
        # outcome is unknown (timed out: librdkafka keeps it as the call in progress, and
        # every later begin or commit fails with __CONFLICT, neither fenced nor abortable);
        # or an abort that failed. A new producer's initialisation settles the outcome.
        self.broken = not aborted
        self._open = False
        reason = ("another attempt at this partition took over (fenced)" if fenced
                  else str(err))
        raise TransactionFailed(f"transactional id {self.transactional_id}: {what}: "
                                f"{reason}") from exc

    def close(self) -> None:
        """Let go of the producer (an open transaction is aborted by the next holder)."""
        self._producer.flush(0)


_PROCESS: dict[str, PartitionTransaction] = {}
# (seconds waited, topics written) of each commit in this process that no task has reported
# yet: a task's own commits come after its row of counts, so the process's next task does
_UNREPORTED: list[tuple[float, int]] = []


def take_commits() -> list[tuple[float, int]]:
    """This process's transaction commits since the last call: (seconds the commit waited
    for the broker, topics the transaction wrote) each."""
    taken = _UNREPORTED[:]
    del _UNREPORTED[:len(taken)]
    return taken


def transaction_for(kafka: Mapping[str, str], producer: Mapping[str, str],
                    transactional_id: str, owner_file: Path, timeout_ms: int = DEFAULT_TIMEOUT_MS,
                    changelog_end: int | None = None) -> tuple[PartitionTransaction, bool]:
    """This process's producer for `transactional_id`, new if it has none, a broken one,
    or one another process may have fenced since: the owner file holds another token (a
    process on this machine), or the partition's changelog ends past where this producer's
    last commit left it (`changelog_end`, read at the task's start: a process on another
    machine committed since); and whether it is new (initialised now: what was committed
    under the id before is final)."""
    txn = _PROCESS.get(transactional_id)
    try:
        owner = owner_file.read_text()
    except OSError:
        owner = None
    moved = (txn is not None and changelog_end is not None
             and txn.changelog_end is not None and changelog_end != txn.changelog_end)
    if txn is not None and not txn.broken and owner == txn.token and not moved:
        return txn, False
    if txn is not None:
        txn.close()
    reason = ("first in this process" if txn is None else "broken" if txn.broken
              else "another process took it (owner file)" if owner != txn.token
              else "another process committed since (changelog end)")
    log.info("a transactional producer is initialised", extra={
        "transactional_id": transactional_id, "why": reason})
    conf = with_refusal_log(producer_settings(kafka, producer), log)
    txn = _PROCESS[transactional_id] = PartitionTransaction(conf, transactional_id,
                                                            timeout_ms)
    owner_file.parent.mkdir(parents=True, exist_ok=True)
    owner_file.write_text(txn.token)
    return txn, True


class TimeoutRefused(ValueError):
    """events.transaction_timeout_s is over what the brokers allow."""


def check_timeout(kafka: Mapping[str, str], timeout_s: float) -> None:
    """TimeoutRefused if `timeout_s` is over a broker's transaction.max.timeout.ms; a
    broker that will not say (no DescribeConfigs right) is passed with a WARNING (then its
    refusal comes at the first transaction, as INVALID_TRANSACTION_TIMEOUT)."""
    from confluent_kafka.admin import AdminClient, ConfigResource

    admin = AdminClient(with_refusal_log(client_conf(kafka), log))
    try:
        brokers = admin.list_topics(timeout=TIMEOUT_S).brokers
        wanted = [ConfigResource(ConfigResource.Type.BROKER, str(b)) for b in brokers]
        for resource, future in admin.describe_configs(wanted,
                                                       request_timeout=TIMEOUT_S).items():
            entry = future.result(timeout=TIMEOUT_S).get("transaction.max.timeout.ms")
            if entry is not None and timeout_s * 1000 > int(entry.value):
                raise TimeoutRefused(
                    f"events.transaction_timeout_s {timeout_s:g} is over what broker "
                    f"{resource.name} allows (transaction.max.timeout.ms {entry.value}, "
                    f"{int(entry.value) / 1000:g} s): lower it, or raise the brokers' limit")
    except KafkaException as exc:
        log.warning("the brokers' transaction.max.timeout.ms could not be read; a transaction "
                    "timeout over it fails the first transaction",
                    extra={"events.transaction_timeout_s": timeout_s, "error": str(exc)})
