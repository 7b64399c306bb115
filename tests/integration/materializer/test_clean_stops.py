"""SIGTERM and Ctrl-C stop a running job after its micro-batch: exit 0, no traceback, and a
restart writes the rest, every change once."""

from __future__ import annotations

import os
import signal
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Producer

from devstack.settings import StackSettings
from publisher.kafka_sink import schema_record
from shared.heartbeat import is_heartbeat
from shared.kafka_topics import TopicCreator, read_to_end
from shared.topic_names import raw_key, raw_topic

from support.materializer_harness import (
    inserted_rows,
    kill_group,
    materializer_command,
    publish_inserts,
    run_materializer,
    start_materializer,
    wait_for_log,
)
from support.mutations import TABLE, body, i32, mutation

pytestmark = pytest.mark.integration
ROWS = 20_000  # one insert of a new row each: one `c` event each
PER_BATCH = 500  # raw records per micro-batch: 40 batches to stop between


def _raw_topic(broker: StackSettings, prefix: str) -> str:
    """The raw topic holding ROWS inserts of TABLE, and its schema record."""
    topic = raw_topic(prefix)
    TopicCreator(broker.bootstrap_servers, 2, 1).ensure(topic)
    TopicCreator(broker.bootstrap_servers, 1, 1).ensure(f"{prefix}.schemas")
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 20})
    producer.produce(f"{prefix}.schemas", key=TABLE.schema_hash.encode(),
                     value=schema_record(TABLE))
    for n in range(ROWS):
        (value,) = mutation(n, body("ROW", n % 100, ts=1000 + n, v=f"v{n}", insert=True),
                            p=n // 100)
        if n % 10_000 == 0:
            producer.flush(30)
        producer.produce(topic, key=raw_key(TABLE.id, i32(n // 100)), value=value)
        producer.poll(0)
    assert producer.flush(60) == 0
    return topic


def _events(broker: StackSettings, prefix: str) -> int:
    return sum(1 for m in read_to_end(broker.bootstrap_servers, f"{prefix}.ks.t")
               if m.value() is not None and not is_heartbeat(m.value()))


@pytest.mark.parametrize("how", ["SIGTERM", "Ctrl-C"])
def test_a_running_job_stops_after_its_micro_batch_without_a_traceback(
        broker: StackSettings, tmp_path: Path, how: str) -> None:
    prefix = f"stop{uuid.uuid4().hex[:6]}"
    _raw_topic(broker, prefix)
    checkpoint = tmp_path / "checkpoint"
    # the default trigger (1 s): a job that keeps up waits for it between batches
    sets = [f"kafka.max_offsets_per_trigger={PER_BATCH}"]
    log = tmp_path / "job.log"
    job = start_materializer(materializer_command(broker, prefix, checkpoint, *sets,
                                                  available_now=False), log)
    try:
        wait_for_log(log, "first micro-batch done", job, 180)
        asked = time.monotonic()
        if how == "SIGTERM":
            job.send_signal(signal.SIGTERM)
        else:  # a terminal's Ctrl-C: SIGINT to the whole foreground process group
            os.killpg(job.pid, signal.SIGINT)
        code = job.wait(120)
        took = time.monotonic() - asked
    finally:
        if job.poll() is None:
            kill_group(job)
    text = log.read_text()
    stopped_at = text.index("stopping after the current micro-batch")
    after = text[stopped_at:]
    assert code == 0, text[-3000:]
    assert "Traceback" not in text and "Py4J" not in text and "Exception" not in after, after
    assert "materializer run ended" in after
    written = _events(broker, prefix)
    assert 0 < written < ROWS, (written, took)
    # nothing lost, nothing twice: a restart writes exactly the rest
    run_materializer(materializer_command(broker, prefix, checkpoint, *sets),
                     tmp_path / "again.log")
    assert _events(broker, prefix) == ROWS


def test_a_stop_while_spark_starts_ends_cleanly(broker: StackSettings, tmp_path: Path) -> None:
    prefix = f"stop{uuid.uuid4().hex[:6]}"
    log = tmp_path / "job.log"
    job = start_materializer(materializer_command(broker, prefix, tmp_path / "checkpoint",
                                                  available_now=False), log)
    try:
        wait_for_log(log, "starting Spark", job, 60)
        job.send_signal(signal.SIGTERM)
        code = job.wait(120)
    finally:
        if job.poll() is None:
            kill_group(job)
    text = log.read_text()
    assert code == 0 and "Traceback" not in text, text[-3000:]
    assert "materializer run ended" in text


def test_a_driver_killed_while_writing_its_first_offsets_starts_again(
        broker: StackSettings, tmp_path: Path) -> None:
    """A driver SIGKILLed while Spark wrote the query's first offsets (the soak's first
    driver fault, 17 s into its writes) leaves the temporary file of batch 0 in the offset
    log, never renamed into place. Spark 4.2 takes any file there at batch 0 for another
    query's and refused every start after it (STATE_STORE_CHECKPOINT_LOCATION_NOT_EMPTY):
    the job now removes such files and starts. The checkpoint is made as that driver left
    it: its metadata, an empty commit log, the offset log's temporary file and checksum."""
    prefix = f"first{uuid.uuid4().hex[:6]}"
    publish_inserts(broker.bootstrap_servers, prefix, {0: range(5), 1: range(5, 10)})
    checkpoint = tmp_path / "checkpoint"
    for log_dir in ("offsets", "commits"):
        (checkpoint / log_dir).mkdir(parents=True)
    (checkpoint / "metadata").write_text(f'{{"id":"{uuid.uuid4()}"}}')
    temp = f".0.{uuid.uuid4()}.tmp"
    (checkpoint / "offsets" / temp).write_text("")
    (checkpoint / "offsets" / f".{temp}.crc").write_text("")
    log = tmp_path / "job.log"
    run_materializer(materializer_command(broker, prefix, checkpoint), log)
    assert len(inserted_rows(broker.bootstrap_servers, prefix)) == 10
    assert "removed what a stop during the query's first start left" in log.read_text()
    assert (checkpoint / "commits" / "0").exists()
