"""A task whose input ends early commits nothing of it: one stopped while it reads because
a sibling task failed (the job then fails the micro-batch, starts again from its
checkpoint and moves on, every change once), and one whose Kafka read fails mid-batch.
And a task that committed before its sibling failed: the batch's next attempt skips its
partition and still counts its events in the job's metrics.

Both read their records one fetch at a time, each fetch held by the broker for FETCH_WAIT_MS
(support.materializer_harness.paced_read), so a read's length is set by its records, not
by how fast the machine is that hour. How the first is made: the raw topic has two
partitions, so a local[2] job runs each in a task of its own. Partition 0's store cannot
open (a file stands where its directory goes), so its task fails once it has read its few
records; partition 1's task reads for SLOW_ROWS x FETCH_WAIT_MS at least, so it is still
reading when Spark aborts the stage and kills it. On Spark 4.2 the worker of such a task
was stopped before it reached its commit in every run here; what a worker does with an
input cut where it could still commit is held at the worker's stream by
tests/unit/materializer/spark/test_cut_input_watch.py.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from pathlib import Path

import pytest

from devstack.settings import StackSettings
from materializer.store.layout import state_root, store_path
from shared.topic_names import raw_topic

from support.materializer_harness import (
    duplicates,
    inserted_rows,
    kill_group,
    materializer_command,
    paced_read,
    publish_inserts,
    start_materializer,
    wait_for_log,
)
from support.services import free_port, metric, wait_until

pytestmark = pytest.mark.integration
FETCH_WAIT_MS = 5  # each fetch of one producer batch (one record)
SLOW_ROWS = 2_000  # partition 1: one new row each, read for 10 s at least
FAST_ROWS = 10  # partition 0: its task fails at its store


def test_a_task_stopped_mid_input_commits_nothing_and_the_job_moves_on(
        broker: StackSettings, tmp_path: Path) -> None:
    prefix = f"cut{uuid.uuid4().hex[:6]}"
    checkpoint, blocker = _partition_0_fails(broker, prefix, tmp_path, slow=1)
    log = tmp_path / "job.log"
    job = start_materializer(materializer_command(
        broker, prefix, checkpoint, "spark.master=local[2]", *paced_read(FETCH_WAIT_MS),
        available_now=False), log)
    try:
        wait_for_log(log, "starting it again from its checkpoint", job)
        blocker.unlink()  # the restart (after its backoff) opens the store
        events = wait_until(lambda: _events_once_all(job, log, broker, prefix,
                                                     SLOW_ROWS + FAST_ROWS),
                            300, "every row's event", interval_s=1)
    finally:
        kill_group(job)
    text = log.read_text()
    assert "Lost task" in text and "TaskKilled" in text, "no task was stopped mid-batch"
    assert "OffsetsDisagree" not in text, text[-4000:]
    assert duplicates(events) == []
    keys = sorted(e[2]["p"] for e in events)
    assert keys == list(range(SLOW_ROWS + FAST_ROWS)), "a change is missing"


def _partition_0_fails(broker: StackSettings, prefix: str, tmp_path: Path, slow: int
                       ) -> tuple[Path, Path]:
    """SLOW_ROWS rows published to raw partition `slow`, FAST_ROWS to the other, one
    producer batch each, and partition 0's store made unable to open (a file where its
    directory goes): the job's checkpoint, and that file (unlink it to let the store open)."""
    fast = 1 - slow
    publish_inserts(broker.bootstrap_servers, prefix,
                    {slow: range(SLOW_ROWS), fast: range(SLOW_ROWS, SLOW_ROWS + FAST_ROWS)},
                    one_per_batch=True)
    checkpoint = tmp_path / "checkpoint"
    blocker = store_path(state_root(checkpoint), raw_topic(prefix), 0)
    blocker.parent.mkdir(parents=True)
    blocker.write_text("not a store")
    return checkpoint, blocker


def _events_once_all(job, log: Path, broker: StackSettings, prefix: str, rows: int
                     ) -> list | None:
    """The events of the rows published, once each row has one (the job still running)."""
    assert job.poll() is None, log.read_text()[-4000:]
    events = inserted_rows(broker.bootstrap_servers, prefix)
    return events if len({e[2]["p"] for e in events}) >= rows else None


def test_a_partition_committed_before_its_sibling_failed_is_counted_by_the_next_attempt(
        broker: StackSettings, tmp_path: Path) -> None:
    """Partition 1's task (a few rows) commits; partition 0's reads its rows for 10 s at
    least, then fails at its store. The micro-batch fails, so Spark reports none of its
    tasks' metrics; its next attempt skips partition 1 (committed already) and reports what
    partition 1's commit recorded it saw: the freshness count is every event's, once."""
    prefix = f"cnt{uuid.uuid4().hex[:6]}"
    checkpoint, blocker = _partition_0_fails(broker, prefix, tmp_path, slow=0)
    log, port = tmp_path / "job.log", free_port()
    job = start_materializer(materializer_command(
        broker, prefix, checkpoint, "spark.master=local[2]", f"http.port={port}",
        *paced_read(FETCH_WAIT_MS), available_now=False), log)
    counted = 'casscade_materializer_freshness_seconds_count{table="ks.t"}'
    total = SLOW_ROWS + FAST_ROWS
    try:
        wait_for_log(log, "starting it again from its checkpoint", job)
        blocker.unlink()  # the restart (after its backoff) opens the store
        wait_until(lambda: _events_once_all(job, log, broker, prefix, total), 300,
                   "every row's event", interval_s=1)
        # the batch's metrics follow its commit at once; none of a later batch can add any
        with contextlib.suppress(AssertionError):
            wait_until(lambda: metric(port, counted) == total, 30, "every event counted")
        assert metric(port, counted) == total, f"{metric(port, counted)} events counted"
        events = inserted_rows(broker.bootstrap_servers, prefix)
    finally:
        kill_group(job)
    text = log.read_text()
    assert f"of {raw_topic(prefix)}[1] committed already" in text, \
        "partition 1 did not commit before its sibling failed"
    assert duplicates(events) == [] and len(events) == total


def test_a_task_whose_kafka_read_fails_mid_batch_commits_nothing(
        broker: StackSettings, tmp_path: Path) -> None:
    """The JVM's read of the raw partition fails while the task is under way (records
    deleted ahead of it: Spark's source raises data loss in the JVM's input iterator) after
    the worker has taken some of its Arrow batches (12 s after the query's start, of a read
    of 60 s at least). Nothing of the partition is committed, and the job ends on the data
    loss, which no restart cures."""
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient

    prefix = f"cut{uuid.uuid4().hex[:6]}"
    rows = 12_000  # read for 60 s at least (FETCH_WAIT_MS each)
    publish_inserts(broker.bootstrap_servers, prefix, {0: range(rows)}, one_per_batch=True)
    log = tmp_path / "job.log"
    job = start_materializer(materializer_command(
        broker, prefix, tmp_path / "checkpoint", "spark.master=local[2]",
        *paced_read(FETCH_WAIT_MS), available_now=False), log)
    try:
        wait_for_log(log, "query started", job)
        # its task has started (4-5 s after the query in the runs here: the read was cut at
        # offset 1,469-1,604) and, paced, has read 2,400 records at most
        time.sleep(12)
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        gone = admin.delete_records([TopicPartition(raw_topic(prefix), 0, rows - 100)])
        for future in gone.values():
            future.result(30)
        code = job.wait(240)
    finally:
        kill_group(job)
    text = log.read_text()
    assert "Could not read records in offset" in text, text[-4000:]  # cut mid-batch
    assert code == 1 and "raw records were deleted before the job read them" in text
    assert inserted_rows(broker.bootstrap_servers, prefix) == []


class _Cut(Exception):
    """What the worker's watch raises when a task's input ended before the JVM's marker."""


def test_a_task_told_its_input_was_cut_commits_nothing_and_its_rerun_commits_once(
        broker: StackSettings, tmp_path: Path) -> None:
    """The guard itself, in process with no Spark (materializer.task.merge_loop.merge_whole
    with real stores, changelog and transactions): a task whose input check fails after it
    merged everything aborts its transaction, and the batch's rerun commits each event
    once. Without the guard the first attempt committed: the rerun then wrote nothing."""
    from materializer.kafka.changelog import ChangelogJob
    from shared.kafka_topics import TopicCreator
    from shared.topic_names import raw_key

    from support.events import NOW_MS, Registry
    from support.mutations import TABLE, body, i32, mutation
    from support.task_run import run_task

    prefix = f"cutin{uuid.uuid4().hex[:6]}"
    kafka = {"bootstrap.servers": broker.bootstrap_servers}
    made = ChangelogJob(kafka, prefix, "job1", 1).changelogs().ensure(1)
    job = ChangelogJob(kafka, prefix, "job1", 1, made, transactional=True)
    TopicCreator(kafka, 1, 1).ensure(f"{prefix}.ks.t")
    rows = [(raw_key(TABLE.id, i32(n)),
             mutation(n, body("ROW", 0, ts=1000 + n, v=f"v{n}", insert=True), p=n)[0])
            for n in range(5)]

    def cut() -> None:
        raise _Cut("the input ended before its marker")

    with pytest.raises(_Cut):
        run_task(tmp_path, 0, NOW_MS, rows, Registry(TABLE), raw_topic(prefix),
                 check_whole=cut, changelog=job)
    assert inserted_rows(broker.bootstrap_servers, prefix) == []
    run_task(tmp_path, 0, NOW_MS, rows, Registry(TABLE), raw_topic(prefix), changelog=job)
    events = inserted_rows(broker.bootstrap_servers, prefix)
    assert sorted(e[2]["p"] for e in events) == list(range(5)), events
    assert [e[3]["op"] for e in events] == ["c"] * 5
