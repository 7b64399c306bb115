"""The topics a start reads and makes before Spark runs a micro-batch: the raw topic's
partition count (and a refusal of an earlier casscade's per-table raw topics), the tables
the schema topic names, and their event topics."""

from __future__ import annotations

import contextlib
import json
import logging
import time

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, ConfigResource

from materializer.output.event_settings import EventSettings
from shared import topic_names
from shared.kafka_topics import TopicCreator, read_to_end

log = logging.getLogger(__name__)


class OldRawLayout(Exception):
    """Kafka holds raw topics of the per-table layout, which this casscade does not read."""


def raw_partitions(kafka: dict[str, str], prefix: str) -> dict[str, int]:
    """{the raw topic: its partition count}, empty while it does not exist; OldRawLayout if
    Kafka holds raw topics of the per-table layout under `prefix`."""
    topics = AdminClient(kafka).list_topics(timeout=30).topics
    old = topic_names.per_table_raw_topics(prefix, set(topics))
    if old:
        raise OldRawLayout(
            f"Kafka holds {len(old)} raw topics of the per-table layout of an earlier "
            f"casscade ({topic_names.first_and_more(old)}), which this one does not "
            f"read: delete them once nothing needs them, or give this job another "
            f"kafka.topic_prefix (docs/operations.md \"One raw topic\")")
    raw = topics.get(topic_names.raw_topic(prefix))
    return {} if raw is None or raw.error is not None else {raw.topic: len(raw.partitions)}


def known_tables(kafka: dict[str, str], prefix: str, wait_s: float = 60.0
                 ) -> list[tuple[str, str]]:
    """(keyspace, table) of every table the schema topic names (none while it does not
    exist). A broker that does not serve the topic yet (one just restarted: the query's
    restart follows it) is asked again for up to `wait_s`; then none, with a warning: the
    workers make each table's event topic when they meet it."""
    deadline = time.monotonic() + wait_s
    while True:
        tables = set()
        try:
            for msg in read_to_end(kafka, topic_names.schema_topic(prefix)):
                with contextlib.suppress(ValueError, KeyError, TypeError):
                    body = json.loads(msg.value())
                    tables.add((str(body["keyspace"]), str(body["table"])))
            return sorted(tables)
        except KafkaException as exc:
            if "not found" in str(exc):
                return []
            if time.monotonic() >= deadline:
                log.warning("the schema topic could not be read; event topics are made as "
                            "their tables are met", extra={"error": str(exc)})
                return []
            time.sleep(1)


def create_event_topics(kafka: dict[str, str], prefix: str, settings: EventSettings
                        ) -> list[str]:
    """Create the event topic of every table the schema topic names now, in one request,
    with the `events` settings' partitions and topic config, and wait until each takes
    writes (`TopicCreator.wait_writable`): a start with a backlog over many tables otherwise
    made them in its first micro-batch, beside the Kafka sink's first writes to them.
    Tables that appear later get theirs from the worker that first meets them. Event topics
    that existed already keep their settings; those that differ are reported. The event
    topics' names."""
    topics = [topic_names.event_topic(prefix, ks, t) for ks, t in known_tables(kafka, prefix)]
    counts = settings.topic_partitions(prefix)
    created = TopicCreator(kafka, settings.partitions, settings.replication_factor
                           ).ensure_many(topics, partitions=counts,
                                         config=settings.topic_config())
    report_other_settings(kafka, [t for t in topics if t not in created], settings, prefix)
    return topics


def report_other_settings(kafka: dict[str, str], topics: list[str], settings: EventSettings,
                          prefix: str) -> list[str]:
    """Warn, once per topic, of existing event topics whose partition count or topic config
    differs from what the `events` settings would give a new one (the job changes no topic
    it did not create: a partition count only grows, and moves keys); the warnings."""
    wanted = settings.consumer_visible_config()
    counts = settings.topic_partitions(prefix)
    if not topics or not (wanted or counts):
        return []  # (the broker's defaults and `partitions`: nothing beyond the count)
    admin = AdminClient(kafka)
    said = []
    meta = admin.list_topics(timeout=30).topics
    found: dict[str, dict[str, str]] = {}
    if wanted:
        resources = [ConfigResource(ConfigResource.Type.TOPIC, t) for t in topics]
        for resource, future in admin.describe_configs(resources).items():
            try:
                entries = future.result(30)
            except KafkaException as exc:  # not allowed (DESCRIBE_CONFIGS): say, go on
                said.append(f"{resource.name}: its settings could not be read ({exc})")
                continue
            found[resource.name] = {k: entries[k].value for k in wanted if k in entries}
    for topic in topics:
        differs = [f"{k} {v} (events: {wanted[k]})" for k, v in found.get(topic, {}).items()
                   if v != wanted[k]]
        have = meta.get(topic)
        if topic in counts and have is not None and len(have.partitions) != counts[topic]:
            differs.append(f"{len(have.partitions)} partitions (events: {counts[topic]})")
        if differs:
            said.append(f"{topic}: {', '.join(differs)}")
    for line in said:
        log.warning("an event topic that exists has other settings than the job would give "
                    "it; left as it is", extra={"topic_settings": line})
    return said
