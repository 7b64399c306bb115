"""shared.kafka_topics.watermarks: a partition without a leader yet is asked again; any
other error is raised at once."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition

from shared.kafka_topics import watermarks


class _Consumer:
    """Answers get_watermark_offsets with the given errors first, then (0, 7)."""

    def __init__(self, *errors: int) -> None:
        self.errors = list(errors)
        self.calls = 0

    def get_watermark_offsets(self, tp: TopicPartition, timeout: float) -> tuple[int, int]:
        self.calls += 1
        if self.errors:
            raise KafkaException(KafkaError(self.errors.pop(0)))
        return 0, 7


def test_a_partition_without_a_leader_yet_is_asked_again() -> None:
    consumer = _Consumer(KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE)
    assert watermarks(consumer, TopicPartition("t", 0), timeout_s=5) == (0, 7)
    assert consumer.calls == 3


def test_another_error_is_raised_at_once() -> None:
    consumer = _Consumer(KafkaError.TOPIC_AUTHORIZATION_FAILED)
    with pytest.raises(KafkaException):
        watermarks(consumer, TopicPartition("t", 0), timeout_s=5)
    assert consumer.calls == 1


def test_a_leader_that_never_comes_raises_after_the_timeout() -> None:
    consumer = _Consumer(*[KafkaError.NOT_LEADER_FOR_PARTITION] * 1000)
    with pytest.raises(KafkaException):
        watermarks(consumer, TopicPartition("t", 0), timeout_s=0.5)
    assert 1 < consumer.calls < 10
