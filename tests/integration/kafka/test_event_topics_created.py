"""The event topics the job creates get the `events` settings (partitions, a table's own
count, cleanup policy, retention, the index's preallocation), whether the driver makes
them at start or a worker when it first meets a table; topics that exist keep theirs, and
a difference is reported."""

from __future__ import annotations

import json
import uuid
from dataclasses import replace

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, ConfigResource

from materializer.kafka.start_topics import create_event_topics, report_other_settings
from materializer.output.event_settings import SEGMENT_INDEX_BYTES, EventSettings
from materializer.task.worker_clients import key_handler
from shared.kafka_topics import TopicCreator
from shared.topic_names import event_topic, schema_topic

pytestmark = pytest.mark.integration


def _settings(admin: AdminClient, topic: str) -> tuple[int, str, str]:
    """(partitions, cleanup.policy, retention.ms) of a topic as the broker has it."""
    parts = len(admin.list_topics(topic, timeout=30).topics[topic].partitions)
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    config = admin.describe_configs([resource])[resource].result(30)
    return parts, config["cleanup.policy"].value, config["retention.ms"].value


def _index_bytes(admin: AdminClient, topic: str) -> str:
    """A topic's segment.index.bytes as the broker has it."""
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    return admin.describe_configs([resource])[resource].result(30)["segment.index.bytes"].value


def test_created_topics_take_the_events_settings_and_existing_ones_are_reported(stack
                                                                                 ) -> None:
    kafka = {"bootstrap.servers": stack.bootstrap_servers}
    prefix = f"ets{uuid.uuid4().hex[:8]}"
    TopicCreator(kafka, 1, 1).ensure(schema_topic(prefix), compacted=True)
    producer, failed = Producer(kafka), []
    for table in ("big", "small"):  # what the publishers announce: the schema topic
        producer.produce(schema_topic(prefix), json.dumps(
            {"keyspace": "ks", "table": table}).encode(), f"h-{table}".encode(),
            on_delivery=lambda err, _m: failed.append(err) if err else None)
    assert producer.flush(30) == 0 and not failed, failed
    settings = EventSettings(partitions=2, table_partitions={"ks.big": 3},
                             cleanup_policy="compact", retention_ms=86_400_000)
    made = create_event_topics(kafka, prefix, settings)
    big, small = event_topic(prefix, "ks", "big"), event_topic(prefix, "ks", "small")
    assert sorted(made) == sorted([big, small])
    admin = AdminClient(kafka)
    assert _settings(admin, big) == (3, "compact", "86400000")
    assert _settings(admin, small) == (2, "compact", "86400000")
    assert _index_bytes(admin, big) == str(SEGMENT_INDEX_BYTES)  # the default's

    # a table a worker meets first: the same rule
    late = event_topic(prefix, "ks", "late")
    key_handler(kafka, prefix, EventSettings(partitions=4, cleanup_policy="delete",
                                             retention_ms=-1)).ensure_topic(late)
    assert _settings(admin, late) == (4, "delete", "-1")
    assert _index_bytes(admin, late) == str(SEGMENT_INDEX_BYTES)
    dead = EventSettings().dead_letters(prefix)
    key_handler(kafka, prefix, EventSettings(cleanup_policy="compact")).ensure_topic(dead)
    assert _settings(admin, dead)[1] == "delete"  # the dead-letter topic: the defaults

    # the same topics under other settings: left as they are, each difference reported
    other = EventSettings(partitions=2, table_partitions={"ks.big": 5},
                          cleanup_policy="delete", retention_ms=86_400_000)
    said = report_other_settings(kafka, [big, small], other, prefix)
    assert any(big in s and "3 partitions (events: 5)" in s
               and "cleanup.policy compact (events: delete)" in s for s in said), said
    assert any(small in s and "retention" not in s for s in said), said
    assert _settings(admin, big) == (3, "compact", "86400000")  # unchanged
    assert report_other_settings(kafka, [big], settings, prefix) == []
    # the index's preallocation is not a difference to report (topics made before it)
    assert report_other_settings(kafka, [big], replace(settings, segment_index_bytes=None),
                                 prefix) == []
