"""A raw partition's transaction opens at its first write in the merge, not when its task
starts reading: a micro-batch whose task reads its input for longer than the transaction
timeout still commits, every change once; and a timeout over the brokers' limit, or
producer settings the Kafka client refuses, are refused at start in one line.

The batch: one raw partition read one record per fetch (the source's
max.partition.fetch.bytes, one record per producer batch), each fetch held by the broker
for fetch.max.wait.ms (fetch.min.bytes is never reached), so the task reads for at least
ROWS x 25 ms, past a transaction timeout of 2 s and the broker's check for timed-out
transactions (every 10 s by default), however fast the machine. Its merge of so few rows
takes well under the timeout, however slow the machine. A transaction opened when the
task starts would be aborted by the broker, and the batch would fail the same way at every
restart. (The task holds its whole input before it opens a store, so the read comes
before the store's open either way; that a store opens its transaction at its first write,
not at its open, is checked in tests/unit/materializer/store/test_partition_store.py.)

The same job then meets a TRUNCATE of the table (a table-truncated record in each raw
partition) under `spark.sweep_keys` = SWEEP_KEYS: its sweep removes that many keys in the
record's micro-batch and no more until the partition's next batch (a heartbeat each), each
key once, and the truncate event comes once every partition is through (issue 71 case 4:
a sweep sized by the table in one transaction would outlast any timeout; the default
sweep size is tested in tests/unit/materializer/task/test_table_sweep.py).
"""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from devstack.settings import StackSettings, repo_root

from support.materializer_harness import (
    duplicates,
    inserted_rows,
    kill_group,
    materializer_command,
    paced_read,
    publish_inserts,
    read_events,
    start_materializer,
    wait_for_log,
)
from support.services import wait_until

pytestmark = pytest.mark.integration
ROWS = 600
SWEEP_KEYS = 100
FETCH_WAIT_MS = 25  # each of the ROWS fetches: the read takes ROWS x this at least


def test_a_batch_read_for_longer_than_the_transaction_timeout_commits(
        stack: StackSettings, tmp_path: Path) -> None:
    prefix = f"txto{uuid.uuid4().hex[:6]}"
    publish_inserts(stack.bootstrap_servers, prefix, {1: range(ROWS)}, one_per_batch=True)
    log = tmp_path / "job.log"
    job = start_materializer(materializer_command(
        stack, prefix, tmp_path / "checkpoint", "events.transaction_timeout_s=2",
        f"spark.sweep_keys={SWEEP_KEYS}", *paced_read(FETCH_WAIT_MS), available_now=False),
        log)
    try:
        def every_event() -> list | None:
            assert job.poll() is None, log.read_text()[-4000:]
            found = inserted_rows(stack.bootstrap_servers, prefix)
            return found if len(found) >= ROWS else None

        events = wait_until(every_event, 300, "every row's event", interval_s=1)
        wait_for_log(log, "first micro-batch done", job, 60)
        swept = _truncated(stack.bootstrap_servers, prefix, job, log)
    finally:
        kill_group(job)
    text = log.read_text()
    batch_ms = [int(line.rsplit("batch_ms=", 1)[1].split()[0]) for line in text.splitlines()
                if "first micro-batch done" in line]
    assert batch_ms[0] > 12_000, "the batch was not longer than the timeout and a check"
    assert "starting it again" not in text, text[-4000:]
    assert duplicates(events) == []
    assert sorted(e[2]["p"] for e in events) == list(range(ROWS))
    assert duplicates(swept) == [] and "OffsetsDisagree" not in text
    removed = [e[2]["p"] for e in swept if e[3] is not None and e[3]["op"] == "d"]
    assert sorted(removed) == list(range(ROWS))  # each key once
    assert [e[3]["op"] for e in swept if e[2] is None] == ["t"]  # after every d


def _truncated(bootstrap: str, prefix: str, job: subprocess.Popen, log: Path) -> list:
    """Truncate the table in the raw topic; the events once its sweep is through: one
    micro-batch's SWEEP_KEYS removals first, then the rest a heartbeat at a time."""
    from confluent_kafka import Producer

    from shared.heartbeat import Heartbeat, encode_heartbeat
    from shared.table_truncate import TableTruncate, encode_table_truncate
    from shared.topic_names import raw_topic

    from support.mutations import TABLE

    topic, table = raw_topic(prefix), f"{prefix}.ks.t"
    producer = Producer({"bootstrap.servers": bootstrap})
    record = encode_table_truncate(TableTruncate(TABLE.id, "ks", "t", "node-1",
                                                 int(time.time() * 1000)))
    for part in (0, 1):
        producer.produce(topic, key=TABLE.id.bytes, value=record, partition=part)
    assert producer.flush(30) == 0

    def removals(at_least: int) -> list | None:
        assert job.poll() is None, log.read_text()[-4000:]
        events = read_events(bootstrap, table)
        gone = [e for e in events if e[3] is not None and e[3]["op"] == "d"]
        return events if len(gone) >= at_least else None

    first = wait_until(lambda: removals(1), 120, "the truncation's first removals")
    # a transaction's events come together: this is the record's micro-batch, whole
    assert len([e for e in first if e[3] is not None and e[3]["op"] == "d"]) == SWEEP_KEYS

    def through() -> list | None:  # a heartbeat gives partition 1 its next micro-batch
        beat = encode_heartbeat(Heartbeat("node-1", int(time.time() * 1000), {}))
        producer.produce(topic, key=b"", value=beat, partition=1)
        producer.flush(30)
        events = removals(ROWS)
        return events if events and any(e[2] is None for e in events) else None

    return wait_until(through, 120, "every removal and the truncate event", interval_s=1)


def test_a_timeout_over_the_brokers_limit_is_refused_at_start(stack: StackSettings,
                                                                tmp_path: Path) -> None:
    cmd = materializer_command(stack, f"txto{uuid.uuid4().hex[:6]}", tmp_path / "c",
                               "events.transaction_timeout_s=1000")
    done = subprocess.run(cmd, cwd=repo_root(), capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL, env=None, executable=sys.executable)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        "Error: events.transaction_timeout_s 1000 is over what broker 1 allows "
        "(transaction.max.timeout.ms 900000, 900 s): lower it, or raise the brokers' limit"]


def test_producer_settings_the_kafka_client_refuses_are_refused_at_start(
        stack: StackSettings, tmp_path: Path) -> None:
    # idempotence (which exactly-once sets) allows at most 5 requests in flight
    cmd = materializer_command(stack, f"txto{uuid.uuid4().hex[:6]}", tmp_path / "c",
                               "kafka.producer.max.in.flight.requests.per.connection=10")
    done = subprocess.run(cmd, cwd=repo_root(), capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL, executable=sys.executable)
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        "Error: kafka.producer: the Kafka client refuses the event producers' settings: "
        ), done.stderr
    assert "max.in.flight" in lines[0], lines
