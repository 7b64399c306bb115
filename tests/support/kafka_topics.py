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


def delete_prefixed(bootstrap: str, prefix: str) -> int:
    """Delete every topic named `prefix` or `prefix.…` (what a benchmark's run made: a
    thousand tables' topics a run left behind fill a small broker's heap); how many."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    names = [t for t in admin.list_topics(timeout=30).topics
             if t == prefix or t.startswith(f"{prefix}.")]
    for start in range(0, len(names), 500):  # (in slices: one request each)
        for future in admin.delete_topics(names[start:start + 500],
                                          operation_timeout=120).values():
            future.result(180)
    return len(names)
