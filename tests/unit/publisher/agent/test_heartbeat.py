"""Heartbeat records (shared.heartbeat) and the publisher's rounds (publisher.agent.heartbeats),
with a sink that records what it is handed (the real one is tested with the agent)."""

from __future__ import annotations

from typing import Any

import pytest

from publisher.agent.heartbeats import BACKLOG, TOPICS_EVERY_S, Heartbeats
from shared import rowupdate
from shared.heartbeat import Heartbeat, decode_heartbeat, encode_heartbeat, is_heartbeat
from shared.metrics import Registry


def test_a_heartbeat_round_trips_and_is_told_from_a_row_update() -> None:
    beat = Heartbeat("node-2", 1_800_000_000_000, {"segment": "CommitLog-7-1.log",
                                                   "read_position": 4096})
    value = encode_heartbeat(beat)
    assert is_heartbeat(value) and decode_heartbeat(value) == beat
    assert not is_heartbeat(rowupdate.VERSION_BYTE + b"rest") and not is_heartbeat(b"")
    assert not is_heartbeat(None)
    with pytest.raises(ValueError, match="not a heartbeat"):
        decode_heartbeat(rowupdate.VERSION_BYTE)


class Sink:
    """What Heartbeats uses of KafkaSink, recording each produce."""

    prefix = "p"

    def __init__(self) -> None:
        self.sent: list[tuple[str, int, bytes]] = []
        self.backlog = 0
        self.listed = 0
        self.partitions = 0
        self.made = False

    def in_flight(self) -> int:
        return self.backlog

    def raw_topic_made(self) -> bool:
        return self.made

    def raw_partitions(self) -> int:
        self.listed += 1
        return self.partitions

    def produce(self, topic: str, key: bytes, value: bytes, on_delivery: Any,
                counted: bool = False, partition: int = -1) -> None:
        assert counted and partition >= 0 and is_heartbeat(value)
        self.sent.append((topic, partition, key))


def test_rounds_go_to_every_raw_partition_at_their_interval_and_wait_for_kafka() -> None:
    now = [100.0]
    sink = Sink()
    beats = Heartbeats(sink, "node-1", 5.0, Registry(), clock=lambda: now[0])  # type: ignore[arg-type]
    assert beats.maybe_send({}) == 0 and sink.listed == 1  # no raw topic yet: nothing to beat
    sink.partitions, sink.made = 3, True  # this publisher made it: read at the next round
    now[0] += 5
    assert beats.maybe_send({}) == 3 and sink.listed == 2
    assert sorted(sink.sent) == [("p.raw", 0, b"node-1"), ("p.raw", 1, b"node-1"),
                                 ("p.raw", 2, b"node-1")]
    now[0] += 4.9
    assert beats.maybe_send({}) == 0  # not due
    now[0] += 0.1
    sink.backlog = BACKLOG + 1
    assert beats.maybe_send({}) == 0  # records wait for Kafka: this round is skipped
    sink.backlog = 0
    now[0] += 5
    sink.partitions = 5  # a reshard added partitions: seen when the count is read again
    assert beats.maybe_send({}) == 3 and sink.listed == 2
    now[0] += TOPICS_EVERY_S
    assert beats.maybe_send({}) == 5 and sink.listed == 3
    assert beats.sent.get() == 11


def test_no_rounds_when_the_interval_is_zero() -> None:
    sink = Sink()
    assert Heartbeats(sink, "n", 0, Registry()).maybe_send({}) == 0  # type: ignore[arg-type]
    assert sink.sent == [] and sink.listed == 0
