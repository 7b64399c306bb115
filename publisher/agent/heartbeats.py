"""The publisher's heartbeats: a record to every partition of the raw topic at a set
interval (`kafka.heartbeat_interval_s`), carrying its host, read position and clock
(`shared.heartbeat`).

Why every partition, not only the ones it wrote to: keys with no writes since the publisher
started still have rows whose TTL expires, and the materializer finds expiries when a
partition's task runs, which takes a record in that partition. A round costs one record
per raw partition, however many tables there are.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from publisher.kafka_sink import KafkaSink, to_every_raw_partition
from shared.heartbeat import Heartbeat, encode_heartbeat
from shared.metrics import Registry

log = logging.getLogger(__name__)
TOPICS_EVERY_S = 60.0  # how often the raw topic's partition count is read again
BACKLOG = 1_000  # records in flight above which a heartbeat round is skipped (Kafka slow)


class Heartbeats:
    """Sends the heartbeat rounds of one publisher (`maybe_send` from its main loop)."""

    def __init__(self, sink: KafkaSink, host: str, interval_s: float, metrics: Registry,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.sink, self.host, self.interval_s, self.clock = sink, host, interval_s, clock
        self.last = -float("inf")
        self.partitions = 0  # of the raw topic, as last read
        self.topics_at = -float("inf")
        self.sent = metrics.counter("casscade_publisher_heartbeats_sent_total",
                                    "Heartbeat records handed to the Kafka producer")
        self.failed = 0

    def maybe_send(self, position: dict[str, Any]) -> int:
        """Send a round if one is due (and Kafka keeps up); how many records it sent."""
        now = self.clock()
        if self.interval_s <= 0 or now - self.last < self.interval_s:
            return 0
        self.last = now
        if self.sink.in_flight() > BACKLOG:
            return 0  # records wait for Kafka: a heartbeat now would say nothing new
        # read again on schedule (a reshard adds partitions), and at once when this publisher
        # made the raw topic and the count is not known yet
        if now - self.topics_at >= TOPICS_EVERY_S or (
                not self.partitions and self.sink.raw_topic_made()):
            try:
                self.partitions = self.sink.raw_partitions()
                self.topics_at = now
            except Exception as exc:  # noqa: BLE001 (Kafka away: the next round tries again)
                log.warning("heartbeat: the raw topic's partitions could not be read",
                            extra={"error": str(exc)})
                return 0
        value = encode_heartbeat(Heartbeat(self.host, int(time.time() * 1000), position))
        key = self.host.encode()
        to_every_raw_partition(self.sink, key, value, self._delivered, self.partitions)
        self.sent.inc(self.partitions)
        return self.partitions

    def _delivered(self, err: Any, _msg: Any) -> None:
        if err is not None:  # a later round says the same: counted, not retried
            self.failed += 1
