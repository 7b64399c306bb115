"""The Spark side: a transformWithState processor over KeyHandler, one call per key per batch.

State per (raw topic, partition key): one ValueState row (state blob, schema hash, timer),
read once and written once per key per micro-batch — per-record state calls cost a socket
round trip each (spark-notes §1.10). A processing-time timer at the next TTL expiry makes
expiry events appear for keys nobody writes to.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pyspark.sql import Row
from pyspark.sql.streaming.stateful_processor import (
    ExpiredTimerInfo,
    StatefulProcessor,
    StatefulProcessorHandle,
    TimerValues,
)

from materializer.avro_registry import ConfluentRegistry, SchemaPublisher, SchemaTopic
from materializer.handler import EventSettings, KeyHandler, RawRecord, Result
from materializer.schema_cache import SchemaCache
from shared.kafka_topics import TopicCreator

OUTPUT_SCHEMA = "topic STRING, key BINARY, value BINARY"
STATE_SCHEMA = "blob BINARY, schema_hash STRING, timer_ms LONG"
# Per Python worker (Spark reuses workers across tasks): schemas, known topics, Avro
# schema headers.
_CACHES: dict[tuple[str, str], SchemaCache] = {}
_TOPICS: dict[str, TopicCreator] = {}
_PUBLISHERS: dict[tuple[str, str], SchemaPublisher] = {}


def _cache(bootstrap: str, topic: str) -> SchemaCache:
    cache = _CACHES.get((bootstrap, topic))
    if cache is None:
        cache = _CACHES[(bootstrap, topic)] = SchemaCache(bootstrap, topic)
    return cache


def _publisher(bootstrap: str, settings: EventSettings) -> SchemaPublisher | None:
    if settings.format != "avro":
        return None
    key = (bootstrap, settings.schema_registry_url or settings.avro_schemas)
    publisher = _PUBLISHERS.get(key)
    if publisher is None:
        publisher = _PUBLISHERS[key] = (
            ConfluentRegistry(settings.schema_registry_url) if settings.schema_registry_url
            else SchemaTopic(bootstrap, settings.avro_schemas,
                             _topics(bootstrap, settings).ensure))
    return publisher


def _topics(bootstrap: str, settings: EventSettings) -> TopicCreator:
    creator = _TOPICS.get(bootstrap)
    if creator is None:
        creator = _TOPICS[bootstrap] = TopicCreator(bootstrap, settings.partitions,
                                                    settings.replication_factor)
    return creator


class MaterializeProcessor(StatefulProcessor):
    """Merges a key's raw records into its state and yields its change events."""

    def __init__(self, bootstrap: str, schema_topic: str, settings: EventSettings) -> None:
        self.bootstrap = bootstrap
        self.schema_topic = schema_topic
        self.settings = settings

    def init(self, handle: StatefulProcessorHandle) -> None:
        """Declare the state (runs on the driver once, then once per task)."""
        self.handle = handle
        self.state = handle.getValueState("partition", STATE_SCHEMA)
        self.handler = KeyHandler(_cache(self.bootstrap, self.schema_topic), self.settings,
                                  _topics(self.bootstrap, self.settings).ensure,
                                  _publisher(self.bootstrap, self.settings))

    def _load(self) -> tuple[bytes | None, str | None, int | None]:
        row = self.state.get()
        if row is None:
            return None, None, None
        return (bytes(row[0]) if row[0] is not None else None), row[1], row[2]

    def _save(self, result: Result, old_timer: int | None) -> Iterator[Row]:
        if result.state is None:
            self.state.clear()
        else:
            self.state.update((result.state, result.schema_hash, result.next_timer_ms))
        if result.next_timer_ms != old_timer:
            if old_timer is not None:
                self.handle.deleteTimer(old_timer)
            if result.next_timer_ms is not None:
                self.handle.registerTimer(result.next_timer_ms)
        for topic, key, value in result.outputs:
            yield Row(topic=topic, key=key, value=value)

    def handleInputRows(self, key: Any, rows: Iterator[Row],
                        timerValues: TimerValues) -> Iterator[Row]:
        """A micro-batch of one key's raw records."""
        topic, partition_key = key
        blob, schema_hash, timer = self._load()
        records = [RawRecord(bytes(r.value), r.partition, r.offset) for r in rows]
        result = self.handler.handle(topic, bytes(partition_key), records, blob, schema_hash,
                                     timerValues.getCurrentProcessingTimeInMs())
        if result.schema_hash is None:  # nothing usable: only dead letters
            yield from (Row(topic=t, key=k, value=v) for t, k, v in result.outputs)
            return
        yield from self._save(result, timer)

    def handleExpiredTimer(self, key: Any, timerValues: TimerValues,
                           expiredTimerInfo: ExpiredTimerInfo) -> Iterator[Row]:
        """The key's next TTL expiry is due."""
        _topic, partition_key = key
        blob, schema_hash, _timer = self._load()
        result = self.handler.expire(bytes(partition_key), blob, schema_hash,
                                     timerValues.getCurrentProcessingTimeInMs())
        if result.schema_hash is None:
            return
        # the engine already removed the fired timer
        yield from self._save(result, None)

    def close(self) -> None:
        """Nothing to release: the schema cache lives for the worker."""
