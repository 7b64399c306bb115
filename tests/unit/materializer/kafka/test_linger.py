"""How long the exactly-once producers let a partition's events wait: under every message
timeout librdkafka would hold them to (it refuses a producer whose linger is not)."""

from __future__ import annotations

from materializer.kafka.transactions import DEFAULT_TIMEOUT_MS, LINGER_MS, linger_ms


def test_the_default_transaction_timeout_leaves_the_full_linger() -> None:
    assert linger_ms({}, DEFAULT_TIMEOUT_MS) == LINGER_MS


def test_a_short_transaction_timeout_halves_it() -> None:
    assert linger_ms({}, 2_000) == 1_000


def test_a_producer_settings_message_timeout_bounds_it_under_either_name() -> None:
    # a user's `kafka.producer` settings, as text (config files) or numbers
    assert linger_ms({"delivery.timeout.ms": "30000"}, DEFAULT_TIMEOUT_MS) == 15_000
    assert linger_ms({"message.timeout.ms": 8_000}, DEFAULT_TIMEOUT_MS) == 4_000
    assert linger_ms({"message.timeout.ms": "0"}, DEFAULT_TIMEOUT_MS) == LINGER_MS  # none
