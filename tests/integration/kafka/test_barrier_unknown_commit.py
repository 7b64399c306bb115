"""The truncate barrier's commit times out and the broker takes it after all: the next poll
writes nothing again (issue 71, case 3). Before, the due tables were worked out before the
new producer's initialisation completed the earlier commit, so each truncate event and
barrier was written twice."""

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


def test_a_barrier_commit_that_timed_out_and_committed_is_not_written_again(
        broker: StackSettings, monkeypatch: pytest.MonkeyPatch) -> None:
    conf = {"bootstrap.servers": broker.bootstrap_servers}
    prefix = f"barrier{uuid.uuid4().hex[:6]}"
    raw, events = raw_topic(prefix), f"{prefix}.ks.t"
    TopicCreator(conf, 2, 1).ensure(raw)
    TopicCreator(conf, 1, 1).ensure(events)
    ensure_topic(conf, prefix, 1)
    reports = Producer(conf)
    for part in (0, 1):  # both raw partitions' stores applied a TRUNCATE of ks.t
        key, value = Applied(JOB, TABLE_ID, "ks", "t", 1_000_000, raw, part).record()
        reports.produce(truncations_topic(prefix), value, key)
    assert reports.flush(30) == 0

    def render(_due: Due) -> tuple[str, bytes]:
        return events, T_EVENT

    writer = TruncateBarrierWriter(conf, prefix, JOB, {raw: 2}, True, render)
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
        assert writer.poll() == []  # the commit the broker took is read back: not due
    finally:
        writer.close()
    assert [m.value() for m in read_to_end(conf, events)] == [T_EVENT]
    barriers = [m.partition() for m in read_to_end(conf, raw) if is_truncate_barrier(m.value())]
    assert sorted(barriers) == [0, 1]
