"""A truncate barrier whose transaction aborted is never acted on: the job reads the raw
topic read_committed (issue 71, case 2). Before, a task that met the barrier's records
(written, not yet aborted) wrote its table's live rows again as `r` events, and the driver's
next attempt at the barrier wrote them once more."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from confluent_kafka import Producer

from devstack.settings import StackSettings
from shared.topic_names import raw_topic
from shared.truncate_barrier import TruncateBarrier, encode_truncate_barrier

from support.materializer_harness import (
    inserted_rows,
    materializer_command,
    publish_inserts,
    run_materializer,
)
from support.mutations import TABLE

pytestmark = pytest.mark.integration


def _aborted_barriers(broker: StackSettings, prefix: str) -> None:
    """A barrier of ks.t in each raw partition, in a transaction that aborts."""
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers,
                         "transactional.id": f"{prefix}.test-aborted-barrier"})
    producer.init_transactions(30)
    producer.begin_transaction()
    value = encode_truncate_barrier(TruncateBarrier(TABLE.id, "ks", "t", floor_us=0))
    for part in (0, 1):
        producer.produce(raw_topic(prefix), key=TABLE.id.bytes, value=value, partition=part)
    assert producer.flush(30) == 0
    producer.abort_transaction(30)


def test_a_barrier_whose_transaction_aborted_writes_no_rows_again(
        broker: StackSettings, tmp_path: Path) -> None:
    prefix = f"abort{uuid.uuid4().hex[:6]}"
    checkpoint = tmp_path / "checkpoint"
    publish_inserts(broker.bootstrap_servers, prefix, {0: range(5), 1: range(5, 10)})
    run_materializer(materializer_command(broker, prefix, checkpoint), tmp_path / "1.log")
    assert [e[3]["op"] for e in inserted_rows(broker.bootstrap_servers, prefix)] == ["c"] * 10

    _aborted_barriers(broker, prefix)
    publish_inserts(broker.bootstrap_servers, prefix, {0: [10], 1: [11]})  # records after
    run_materializer(materializer_command(broker, prefix, checkpoint), tmp_path / "2.log")
    ops = sorted(e[3]["op"] for e in inserted_rows(broker.bootstrap_servers, prefix))
    assert ops == ["c"] * 12  # read uncommitted: ten `r` events more
