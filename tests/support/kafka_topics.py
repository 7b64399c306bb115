"""Fresh topics on the test broker, each with a name of its own."""

from __future__ import annotations

import uuid

from confluent_kafka.admin import AdminClient, NewTopic


def make_topic(bootstrap: str, partitions: int = 3) -> str:
    """Create a fresh topic and return its name."""
    name = f"test.{uuid.uuid4().hex[:10]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, num_partitions=partitions,
                                  replication_factor=1)])[name].result(timeout=30)
    return name
