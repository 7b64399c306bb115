"""The topics a start reads and makes before Spark runs a micro-batch: the raw topic's
partition count (and a refusal of an earlier casscade's per-table raw topics), the tables
the schema topic names, and their event topics."""

from __future__ import annotations

import contextlib
import json
import logging
import time

from confluent_kafka.admin import AdminClient

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
    from confluent_kafka import KafkaException

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


def create_event_topics(kafka: dict[str, str], prefix: str, partitions: int,
                        replication_factor: int) -> list[str]:
    """Create the event topic of every table the schema topic names now, in one request,
    and wait until each takes writes (`TopicCreator.wait_writable`): a start with a backlog
    over many tables otherwise made them in its first micro-batch, beside the Kafka sink's
    first writes to them. Tables that appear later get theirs from the worker that first
    meets them. The event topics' names."""
    topics = [topic_names.event_topic(prefix, ks, t) for ks, t in known_tables(kafka, prefix)]
    TopicCreator(kafka, partitions, replication_factor).ensure_many(topics)
    return topics
