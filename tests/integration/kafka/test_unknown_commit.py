"""A commit whose outcome is unknown (the broker stopped while it commits) leaves the
worker's cached producer unfit: the partition's next attempt in the same process makes a
new one, whose initialisation settles the outcome, and commits (issue 71, case 1)."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from devstack import kafka
from devstack.settings import StackSettings
from materializer.kafka import transactions
from materializer.kafka.transactions import TransactionFailed, transaction_for
from shared.kafka_topics import read_to_end

from support.kafka_topics import make_topic

pytestmark = pytest.mark.integration


def test_a_commit_with_an_unknown_outcome_makes_the_next_attempt_use_a_new_producer(
        broker: StackSettings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The broker is stopped (SIGSTOP) before a commit: the commit times out. Before the
    fix, the next attempt in this process reused the producer, whose every later
    transactional call failed with __CONFLICT (the commit still in progress), so a job
    with one worker stopped after its restarts."""
    monkeypatch.setattr(transactions, "TIMEOUT_S", 3.0)  # the commit's wait; 60 s in a job
    monkeypatch.setattr(transactions, "_PROCESS", {})  # this test's producers, let go after
    topic = make_topic(broker.bootstrap_servers, partitions=1)
    conf = {"bootstrap.servers": broker.bootstrap_servers}
    tid, owner = f"casscade.test.unknown.{topic}", tmp_path / "owner"
    first, _ = transaction_for(conf, {}, tid, owner)
    first.produce(topic, b"first", b"{}", partition=0)
    pid = kafka.running_pid(broker)
    assert pid is not None
    os.kill(pid, signal.SIGSTOP)
    try:
        with pytest.raises(TransactionFailed, match="the commit failed"):
            first.commit()
    finally:
        os.kill(pid, signal.SIGCONT)
    assert first.broken

    again, new = transaction_for(conf, {}, tid, owner)
    assert new and again is not first
    again.produce(topic, b"again", b"{}", partition=0)
    assert again.commit() == {(topic, 0): again.delivered[(topic, 0)]}
    keys = [m.key() for m in read_to_end(broker.bootstrap_servers, topic)]
    # the first commit is settled either way by the new producer's initialisation
    assert keys in ([b"again"], [b"first", b"again"])
