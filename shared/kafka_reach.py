"""Is Kafka there? One check at a command's start, so an unreachable or refusing broker is
one line naming the brokers and the reason, not a stream of client retries."""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Mapping
from typing import Any

from shared.kafka_security import refusal
from shared.reach import Unreachable

DEFAULT_WAIT_S = 15.0  # librdkafka retries its connections meanwhile
# librdkafka's FAIL line: "<broker>/<id>: <what failed> (after 0ms in state CONNECT)"
_FAIL = re.compile(r"\]: (?:\S+/\S+: )?(?P<reason>.*?)(?: \(after \d+ms in state \w+\))?$")


class KafkaUnreachable(Unreachable):
    """No broker of a client config answered in time (or every one refused us)."""


class _Reasons(logging.Handler):
    """Keeps what librdkafka's log and error callback said went wrong, prints nothing."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.last: str | None = None
        self.refused: str | None = None

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if message.startswith("FAIL"):
            match = _FAIL.search(message)
            self.last = match.group("reason") if match else message

    def on_error(self, error: Any) -> None:
        self.refused = refusal(error) or self.refused


def cluster_id(conf: Mapping[str, Any], wait_s: float = DEFAULT_WAIT_S) -> str | None:
    """The id of the Kafka cluster the librdkafka settings `conf` dial; KafkaUnreachable
    naming the brokers and the reason when none answers within `wait_s`."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    reasons = _Reasons()
    quiet = logging.getLogger(f"casscade.kafka_reach.{id(reasons)}")
    quiet.propagate = False
    quiet.setLevel(logging.DEBUG)
    quiet.addHandler(reasons)
    admin = AdminClient({**{k: v for k, v in conf.items() if k not in ("error_cb", "logger")},
                         "error_cb": reasons.on_error, "logger": quiet})
    where = conf.get("bootstrap.servers")
    deadline = time.monotonic() + wait_s
    try:
        while True:  # in short tries: a refusal (credentials, TLS) ends the wait at once
            try:
                return admin.list_topics(timeout=min(2.0, wait_s)).cluster_id
            except KafkaException as exc:
                admin.poll(0.2)  # serve the callbacks: the log lines say why
                if reasons.refused:
                    raise KafkaUnreachable(f"Kafka at {where} refused us: "
                                           f"{reasons.refused}") from None
                if time.monotonic() >= deadline:
                    reason = reasons.last or exc.args[0].str()
                    raise KafkaUnreachable(f"Kafka at {where} did not answer within "
                                           f"{wait_s:.0f} s: {reason}") from None
    finally:
        quiet.removeHandler(reasons)
