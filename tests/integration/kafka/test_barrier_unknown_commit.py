"""The truncate barrier's commit times out and the broker takes it after all: the next poll
writes nothing again (issue 71, case 3). Before, the due tables were worked out before the
new producer's initialisation completed the earlier commit, so each truncate event and
barrier was written twice. And a barrier whose producer cannot initialise (the broker
stopped) does not hold the runner's loop for the client's whole timeout: each poll waits a
moment and the next goes on with the same producer."""

from __future__ import annotations

import os
import signal
import uuid
from typing import Any

import pytest
from confluent_kafka import KafkaException, Producer

from devstack import kafka
from devstack.settings import StackSettings
from materializer.kafka import truncate_barrier
from materializer.kafka.truncate_barrier import TruncateBarrierWriter, ensure_topic
from materializer.rules.truncate_barrier import Applied, Due
from shared.kafka_topics import TopicCreator, read_to_end
from shared.topic_names import raw_topic, truncations_topic, truncations_transactional_id
from shared.truncate_barrier import is_truncate_barrier

from support.services import wait_until

pytestmark = pytest.mark.integration
JOB, TABLE_ID, T_EVENT = "job-1", uuid.uuid4(), b'{"op": "t"}'


class _StopsTheBrokerAtCommit(Producer):
    """A producer whose commit request reaches a stopped broker (SIGSTOP, once the
    transaction's records are acknowledged): the call times out, and the broker takes the
    request from its socket when it runs again (SIGCONT, as the call returns)."""

    broker_pid: int

    def commit_transaction(self, *args: Any) -> None:
        assert self.flush(30) == 0
        os.kill(self.broker_pid, signal.SIGSTOP)
        try:
            super().commit_transaction(*args)
        finally:
            os.kill(self.broker_pid, signal.SIGCONT)


def _reported(conf: dict[str, str]) -> tuple[str, str, str]:
    """A new prefix whose two raw partitions' stores both applied a TRUNCATE of ks.t:
    (prefix, event topic, raw topic)."""
    prefix = f"barrier{uuid.uuid4().hex[:6]}"
    raw, events = raw_topic(prefix), f"{prefix}.ks.t"
    TopicCreator(conf, 2, 1).ensure(raw)
    TopicCreator(conf, 1, 1).ensure(events)
    ensure_topic(conf, prefix, 1)
    reports = Producer(conf)
    for part in (0, 1):
        key, value = Applied(JOB, TABLE_ID, "ks", "t", 1_000_000, raw, part).record()
        reports.produce(truncations_topic(prefix), value, key)
    assert reports.flush(30) == 0
    return prefix, events, raw


def _render(events: str) -> Any:
    def render(_due: Due) -> tuple[str, bytes]:
        return events, T_EVENT
    return render


def test_a_barrier_commit_that_timed_out_and_committed_is_not_written_again(
        broker: StackSettings, monkeypatch: pytest.MonkeyPatch) -> None:
    conf = {"bootstrap.servers": broker.bootstrap_servers}
    prefix, events, raw = _reported(conf)
    writer = TruncateBarrierWriter(conf, prefix, JOB, {raw: 2}, True, _render(events))
    stopping = _StopsTheBrokerAtCommit(conf | {
        "acks": "all", "enable.idempotence": True,
        "transactional.id": truncations_transactional_id(prefix),
        "transaction.timeout.ms": 60_000})
    stopping.broker_pid = kafka.running_pid(broker) or 0
    assert stopping.broker_pid
    stopping.init_transactions(30)
    writer._producer = stopping  # (the writer's own, as if it had made it)
    try:
        monkeypatch.setattr(truncate_barrier, "TIMEOUT_S", 3.0)  # the commit's wait
        with pytest.raises(KafkaException):
            writer.poll(to_end=True)
        monkeypatch.setattr(truncate_barrier, "TIMEOUT_S", 30.0)
        _until_initialised(writer)  # the commit the broker took is read back: not due
    finally:
        writer.close()
    _written_once(conf, events, raw)


def _until_initialised(writer: TruncateBarrierWriter) -> None:
    """Poll until the writer's producer is initialised (that poll reads the truncations
    topic to its end and writes what is due): nothing may be due."""
    wait_until(lambda: writer.poll() == [] and writer._producer is not None, 60,
               "the barrier's producer initialised")


def _written_once(conf: dict[str, str], events: str, raw: str) -> None:
    assert [m.value() for m in read_to_end(conf, events)] == [T_EVENT]
    barriers = [m.partition() for m in read_to_end(conf, raw) if is_truncate_barrier(m.value())]
    assert sorted(barriers) == [0, 1]


def test_a_barrier_producer_that_cannot_initialise_yet_is_kept_and_polls_go_on(
        broker: StackSettings) -> None:
    conf = {"bootstrap.servers": broker.bootstrap_servers}
    prefix, events, raw = _reported(conf)
    writer = TruncateBarrierWriter(conf, prefix, JOB, {raw: 2}, True, _render(events))
    pid = kafka.running_pid(broker) or 0
    assert pid
    os.kill(pid, signal.SIGSTOP)
    try:  # (before: one poll waited 30 s in init_transactions, then raised)
        assert writer.poll() == [] and writer._producer is None
        starting = writer._starting
        assert writer.poll() == [] and writer._starting is starting is not None
    finally:
        os.kill(pid, signal.SIGCONT)

    def written() -> bool:
        writer.poll()
        return writer.tables_written == 1

    try:
        wait_until(written, 90, "the truncate events written once the broker runs again")
    finally:
        writer.close()
    _written_once(conf, events, raw)
