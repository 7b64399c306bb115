"""The partition stores' changelog topics on the real broker (materializer.kafka.changelog)."""

from __future__ import annotations

import uuid

import pytest

from materializer.kafka.changelog import Changelogs
from shared.topic_names import changelog_topic, raw_topic

pytestmark = pytest.mark.integration


def test_a_tasks_changelog_ends_read_at_once_equal_each_partitions_own(stack):
    """ends() reads every partition of a fresh changelog topic in one go; each equals
    what the partition's own end() reads, and a partition handed its end uses it once."""
    prefix = f"cl{uuid.uuid4().hex[:6]}"
    logs = Changelogs({"bootstrap.servers": stack.bootstrap_servers}, prefix, "job1", 1)
    raw = raw_topic(prefix)
    made = logs.ensure(12)
    assert made == {changelog_topic(prefix, "job1"): 12}
    for p in range(12):
        for i in range(p % 4):  # some partitions empty, some with a few writes
            logs.partition(raw, p).write(f"k{i}".encode(), b"v")
    logs.flush()
    ends = logs.ends(made)
    assert set(ends) == {(t, p) for t, n in made.items() for p in range(n)}
    for (topic, p), end in ends.items():
        assert end == logs.end(topic, p)
    assert sorted(set(ends.values())) == [0, 1, 2, 3]

    topic = changelog_topic(prefix, "job1")
    handed = logs.partition(raw, 1, {(topic, 1): 99})  # not the real end: shows it is used
    assert handed.end() == 99
    assert handed.end() == ends[(topic, 1)]  # then read from the broker again
    assert logs.ends({}) == {}


def test_a_store_rebuilt_from_a_changelog_with_aborted_writes_takes_the_committed_only(
        stack, tmp_path):
    """Exactly-once: a store's writes go into its partition's transaction. One attempt
    commits, the next aborts (its events and writes invisible), a third writes and is cut
    off (a zombie, fenced by the producer of the attempt after it). A store rebuilt from
    the changelog holds what the committed attempts wrote, and its end is the one a
    read_committed reader sees."""
    from materializer.kafka.transactions import TransactionFailed, transaction_for
    from materializer.store.partition_store import PartitionStore
    from shared.kafka_topics import TopicCreator, read_to_end

    prefix = f"cl{uuid.uuid4().hex[:6]}"
    kafka = {"bootstrap.servers": stack.bootstrap_servers}
    logs = Changelogs(kafka, prefix, "job1", 1)
    raw = raw_topic(prefix)
    logs.ensure(2)
    events = f"{prefix}.ks.t"
    TopicCreator(kafka, 1, 1).ensure_many([events])
    owner = tmp_path / "txn-owner.1"

    def attempt(batch: int, value: bytes, outcome: str) -> None:
        txn, _ = transaction_for(kafka, {}, f"{prefix}-t1", owner)
        store = PartitionStore(tmp_path / f"local-{batch}", batch, 0, 0,
                               logs.partition(raw, 1, None, txn))
        store.put(b"k", value)
        txn.produce(events, b"k", value)
        if outcome == "zombie":  # a new attempt's producer takes the id: this one is fenced
            owner.unlink()
            transaction_for(kafka, {}, f"{prefix}-t1", owner)
            with pytest.raises(TransactionFailed, match="fenced"):
                store.close()
        else:
            store.close(failed=outcome == "abort")

    attempt(1, b"one", "commit")
    attempt(2, b"two", "abort")
    attempt(2, b"zombie", "zombie")
    attempt(2, b"three", "commit")
    assert [m.value() for m in read_to_end(kafka, events)] == [b"one", b"three"]
    rebuilt = PartitionStore(tmp_path / "rebuilt", 3, 0, 0, logs.partition(raw, 1))
    try:
        assert rebuilt.restored > 0 and rebuilt.get(b"k") == b"three"
    finally:
        rebuilt.close()


def test_a_cached_producer_another_machine_fenced_is_replaced_before_the_task_reads(
        stack, tmp_path):
    """A worker's cached producer of a raw partition, fenced meanwhile by the partition's
    task on another executor (whose owner file is its own): the changelog's end past the
    one the cached producer's last commit left makes the next task take a new producer
    before it opens the store; the cached one could no longer commit."""
    from materializer.kafka.changelog import ChangelogJob
    from materializer.kafka.transactions import (
        PartitionTransaction,
        TransactionFailed,
        transaction_for,
    )
    from shared.topic_names import transactional_id

    prefix = f"cl{uuid.uuid4().hex[:6]}"
    kafka = {"bootstrap.servers": stack.bootstrap_servers}
    job = ChangelogJob(kafka, prefix, "job1", 1, transactional=True)
    logs = job.changelogs()
    logs.ensure(2)
    raw = raw_topic(prefix)
    topic = changelog_topic(prefix, "job1")
    owner = tmp_path / "txn-owner.1"

    txn, new = job.transaction(raw, 1, owner)
    assert new
    here = logs.partition(raw, 1, None, txn)
    here.write(b"k", b"here")
    ours = here.flush()  # committed: the end after our commit
    assert txn.changelog_end == ours

    # the partition's task on another executor: a producer of its own, same id, commits
    there = PartitionTransaction(kafka, transactional_id(prefix, raw, 1))
    there.produce(topic, b"k", b"there", 1)
    there.commit()
    there.close()
    end = logs.settled_end(topic, 1, ours)
    assert end > ours

    # nothing changed here (same owner file): without the end the cached one comes back
    cached, new = transaction_for(kafka, {}, transactional_id(prefix, raw, 1), owner)
    assert cached is txn and not new
    # with the end read at the task's start, a new producer comes first, and commits
    fresh, new = job.transaction(raw, 1, owner, end)
    assert new and fresh is not txn
    again = logs.partition(raw, 1, None, fresh)
    again.write(b"k", b"fresh")
    assert again.flush() > end
    # the cached one could not have committed
    txn.produce(topic, b"k", b"stale", 1)
    with pytest.raises(TransactionFailed, match="fenced"):
        txn.commit()
