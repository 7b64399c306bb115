"""How long the exactly-once producers let a partition's events wait: under every message
timeout librdkafka would hold them to (it refuses a producer whose linger is not); and the
start's check of their settings."""

from __future__ import annotations

import pytest

from materializer.kafka.transactions import (
    DEFAULT_TIMEOUT_MS,
    LINGER_MS,
    ProducerRefused,
    check_producer,
    linger_ms,
    producer_conf,
)


def test_the_default_transaction_timeout_leaves_the_full_linger() -> None:
    assert linger_ms({}, DEFAULT_TIMEOUT_MS) == LINGER_MS


def test_a_short_transaction_timeout_halves_it() -> None:
    assert linger_ms({}, 2_000) == 1_000


def test_a_producer_settings_message_timeout_bounds_it_under_either_name() -> None:
    # a user's `kafka.producer` settings, as text (config files) or numbers
    assert linger_ms({"delivery.timeout.ms": "30000"}, DEFAULT_TIMEOUT_MS) == 15_000
    assert linger_ms({"message.timeout.ms": 8_000}, DEFAULT_TIMEOUT_MS) == 4_000
    assert linger_ms({"message.timeout.ms": "0"}, DEFAULT_TIMEOUT_MS) == LINGER_MS  # none


def test_producer_settings_the_client_refuses_are_named_before_spark_starts() -> None:
    # made and dropped without a broker: librdkafka checks its settings as it is made
    nowhere = {"bootstrap.servers": "127.0.0.1:1"}
    with pytest.raises(ProducerRefused, match='No such configuration property: "bogus"'):
        check_producer(nowhere, {"bogus": "1"}, DEFAULT_TIMEOUT_MS)
    with pytest.raises(ProducerRefused, match=r"max\.in\.flight"):
        check_producer(nowhere, {"max.in.flight.requests.per.connection": "10"},
                       DEFAULT_TIMEOUT_MS)
    # a message timeout the linger comes under, and settings exactly-once sets over
    check_producer(nowhere, {"delivery.timeout.ms": "30000", "acks": "1"}, DEFAULT_TIMEOUT_MS)


def test_a_producer_setting_wins_over_the_jobs_defaults_not_over_what_exactly_once_needs(
        ) -> None:
    conf = producer_conf({"linger.ms": "200", "compression.type": "zstd", "acks": "1",
                          "enable.idempotence": "false"}, "txn-1", DEFAULT_TIMEOUT_MS)
    assert (conf["linger.ms"], conf["compression.type"]) == ("200", "zstd")
    assert (conf["acks"], conf["enable.idempotence"]) == ("all", True)
    assert conf["transactional.id"] == "txn-1"
    assert conf["transaction.timeout.ms"] == DEFAULT_TIMEOUT_MS
    assert producer_conf({}, "txn-1", DEFAULT_TIMEOUT_MS)["linger.ms"] == LINGER_MS
