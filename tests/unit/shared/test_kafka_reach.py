"""Kafka's reachability check: librdkafka's words for why, in one line."""

from __future__ import annotations

import logging

from shared.kafka_reach import _Reasons


def _said(*lines: str) -> str | None:
    reasons = _Reasons()
    for line in lines:
        reasons.emit(logging.makeLogRecord({"msg": line}))
    return reasons.last


def test_the_last_failure_is_the_reason_without_its_broker_and_state() -> None:
    assert _said("FAIL [rdkafka#producer-1] [thrd:127.0.0.1:19999/bootstrap]: 127.0.0.1:19999"
                 "/bootstrap: Connect to ipv4#127.0.0.1:19999 failed: Connection refused "
                 "(after 0ms in state CONNECT)") == ("Connect to ipv4#127.0.0.1:19999 failed: "
                                                     "Connection refused")
    assert _said("CONFWARN [rdkafka#producer-1] [thrd:app]: a warning",
                 "FAIL [rdkafka#producer-2] [thrd:k:9092/bootstrap]: k:9092/bootstrap: "
                 "Failed to resolve 'k:9092': Name or service not known (after 1ms in state "
                 "CONNECT)") == "Failed to resolve 'k:9092': Name or service not known"
    assert _said("CONFWARN [rdkafka#producer-1] [thrd:app]: a warning") is None
