"""How close the job is to losing raw records: the age of the oldest raw record it has not
read, beside the raw topic's retention (both for /metrics, read when Prometheus scrapes).

Kafka deletes a raw record `retention.ms` after it was appended whether the job has read it
or not; the job then stops (its source fails on the gap) and the tables need a new
bootstrap. The offsets-behind gauge says how many records wait, not how long they have
waited: this says the second, against the limit."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping

from confluent_kafka import Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource

from shared.kafka_security import with_refusal_log

log = logging.getLogger(__name__)
TIMEOUT_S = 5.0
RETENTION_EVERY_S = 600.0  # a topic's retention changes rarely (kafka-configs --alter)


class RawAgeProbe:
    """Reads, every `interval_s` on a thread of its own (a scrape never waits on Kafka), the
    raw topic's retention and the append time of the first record the job has not read in
    each raw partition."""

    def __init__(self, client: Mapping[str, str], raw_topic: str,
                 interval_s: float = 15.0, clock: Callable[[], float] = time.time) -> None:
        self.client = dict(client)
        self.raw_topic = raw_topic
        self.interval_s = interval_s
        self.clock = clock
        self._consumer: Consumer | None = None
        self._retention: tuple[float, float | None] | None = None  # (read at, seconds)
        self._latest: tuple[float | None, float] | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self, end_offsets: Callable[[], Mapping[int, int] | None]) -> None:
        """Read every interval_s at `end_offsets()`, the job's read position per raw
        partition (None: not known yet), until close()."""
        def loop() -> None:
            while not self._stop.wait(self.interval_s):
                ends = end_offsets()
                if ends:
                    self._latest = self.read(ends) or self._latest
            self._close_consumer()
        self._thread = threading.Thread(target=loop, name="raw-age-probe", daemon=True)
        self._thread.start()

    def latest(self) -> tuple[float | None, float] | None:
        """The last reading (see read), None before the first."""
        return self._latest

    def read(self, end_offsets: Mapping[int, int]) -> tuple[float | None, float] | None:
        """(the raw topic's retention in seconds, inf when unlimited, None when unknown;
        the age in seconds of the oldest raw record past `end_offsets`, 0 when the job has
        read everything), or None when Kafka did not answer."""
        now = self.clock()
        try:
            return self._retention_s(now), self._oldest_unread_age_s(end_offsets, now)
        except (KafkaException, TimeoutError) as exc:  # Kafka away: the last reading stays
            log.warning("could not read the raw topic's retention or oldest unread record",
                        extra={"topic": self.raw_topic, "error": str(exc)})
            return None

    def close(self) -> None:
        """Stop the thread (its consumer closed with it)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(2 * TIMEOUT_S + 5)
        else:
            self._close_consumer()

    def _close_consumer(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None

    def _retention_s(self, now: float) -> float | None:
        if self._retention is not None and now - self._retention[0] < RETENTION_EVERY_S:
            return self._retention[1]
        resource = ConfigResource(ConfigResource.Type.TOPIC, self.raw_topic)
        # held until the answer: a freed client cancels its requests
        admin = AdminClient(with_refusal_log(self.client, log))
        futures = admin.describe_configs([resource], request_timeout=TIMEOUT_S)
        entry = futures[resource].result(TIMEOUT_S).get("retention.ms")
        ms = int(entry.value) if entry is not None and entry.value is not None else None
        seconds = None if ms is None else (float("inf") if ms < 0 else ms / 1000)
        self._retention = (now, seconds)
        return seconds

    def _oldest_unread_age_s(self, end_offsets: Mapping[int, int], now: float) -> float:
        consumer = self._consumer or self._open()
        waiting: dict[int, int] = {}
        for partition, end in end_offsets.items():
            _low, high = consumer.get_watermark_offsets(
                TopicPartition(self.raw_topic, partition), timeout=TIMEOUT_S, cached=False)
            if end < high:
                waiting[partition] = end
        if not waiting:
            return 0.0
        consumer.assign([TopicPartition(self.raw_topic, p, off) for p, off in waiting.items()])
        oldest_ms: float | None = None
        deadline = time.monotonic() + TIMEOUT_S
        try:
            while waiting and time.monotonic() < deadline:
                for msg in consumer.consume(len(waiting), timeout=0.5):
                    if msg.error() is not None or msg.partition() not in waiting:
                        continue
                    del waiting[msg.partition()]  # the first past the read position
                    _kind, at_ms = msg.timestamp()
                    oldest_ms = at_ms if oldest_ms is None else min(oldest_ms, at_ms)
        finally:
            consumer.unassign()
        return 0.0 if oldest_ms is None else max(0.0, now - oldest_ms / 1000)

    def _open(self) -> Consumer:
        self._consumer = Consumer(with_refusal_log(self.client, log) | {
            "group.id": "casscade-raw-age-probe",  # never joins: assign() only, no commits
            "enable.auto.commit": False, "enable.partition.eof": False})
        return self._consumer
