"""The Kafka clients a Python worker shares across the tasks it runs (Spark reuses
workers): the schema cache, the event topic creator and the Avro schema publisher, one of
each per client config, and the KeyMaterializer made over them."""

from __future__ import annotations

from materializer.kafka.avro_registry import ConfluentRegistry, SchemaTopic
from materializer.kafka.schema_cache import SchemaCache
from materializer.key_materializer import KeyMaterializer
from materializer.output.avro_wire import SchemaPublisher
from materializer.output.event_settings import EventSettings
from materializer.rules.pages import DEFAULT_PAGE_ROWS
from shared import topic_names
from shared.kafka_topics import TopicCreator

_CACHES: dict[tuple[str, str], SchemaCache] = {}
_TOPICS: dict[tuple[tuple[str, str], ...], TopicCreator] = {}
_PUBLISHERS: dict[tuple[str, str], SchemaPublisher] = {}


# The Python worker's Kafka clients are shared by every task it runs, one per client
# config (librdkafka settings: brokers and security).
def _cache(kafka: dict[str, str], topic: str) -> SchemaCache:
    key = (_conf_key(kafka), topic)
    cache = _CACHES.get(key)
    if cache is None:
        cache = _CACHES[key] = SchemaCache(kafka, topic)
    return cache


def _publisher(kafka: dict[str, str], settings: EventSettings, prefix: str
               ) -> SchemaPublisher | None:
    if settings.format != "avro":
        return None
    key = (_conf_key(kafka), settings.schema_registry_url or settings.avro_schemas(prefix))
    publisher = _PUBLISHERS.get(key)
    if publisher is None:
        publisher = _PUBLISHERS[key] = (
            ConfluentRegistry(settings.schema_registry_url, settings.schema_registry.access())
            if settings.schema_registry_url
            else SchemaTopic(kafka, settings.avro_schemas(prefix),
                             _topics(kafka, settings).ensure))
    return publisher


def _topics(kafka: dict[str, str], settings: EventSettings) -> TopicCreator:
    key = _conf_key(kafka)
    creator = _TOPICS.get(key)
    if creator is None:
        creator = _TOPICS[key] = TopicCreator(kafka, settings.partitions,
                                              settings.replication_factor)
    return creator


def key_handler(kafka: dict[str, str], prefix: str, settings: EventSettings,
                page_rows: int = DEFAULT_PAGE_ROWS, made: frozenset[str] = frozenset()
                ) -> KeyMaterializer:
    """A KeyMaterializer of topic prefix `prefix` over the Python worker's shared schema
    cache, topic creator and schema publisher; `settings`: a `resolved` copy; `made`: the
    event topics the driver made at start, which the worker takes as made (it would
    otherwise read the cluster's whole metadata and probe each one's partitions once per
    table it meets)."""
    creator = _topics(kafka, settings)
    creator.known.update(made)
    counts, config = settings.topic_partitions(prefix), settings.topic_config()
    dead_letters = settings.dead_letters(prefix)

    def ensure(topic: str) -> None:
        # an event topic with the `events` settings' partitions and config (the driver's
        # rule, start_topics.create_event_topics); the dead-letter topic with the defaults
        creator.ensure_many([topic], partitions=counts,
                            config=None if topic == dead_letters else config)

    return KeyMaterializer(_cache(kafka, topic_names.schema_topic(prefix)), settings, prefix,
                           ensure, _publisher(kafka, settings, prefix), page_rows)


def _conf_key(kafka: dict[str, str]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(kafka.items()))

