"""Fresh topics on the test broker, each with a name of its own."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

from confluent_kafka.admin import AdminClient, NewTopic


def make_topic(bootstrap: str, partitions: int = 3) -> str:
    """Create a fresh topic and return its name."""
    name = f"test.{uuid.uuid4().hex[:10]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, num_partitions=partitions,
                                  replication_factor=1)])[name].result(timeout=30)
    return name


def delete_prefixed(bootstrap: str, prefix: str, log_dir: Path | None = None) -> int:
    """Delete every topic named `prefix` or `prefix.…` (what a benchmark's run made: a
    thousand tables' topics a run left behind fill a small broker's heap); how many. With
    the broker's `log_dir`: return once the broker has removed their logs too (it does so
    in the background, log.segment.delete.delay.ms later, which put a thousand
    partitions' removal in the middle of the next run)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    names = [t for t in admin.list_topics(timeout=30).topics
             if t == prefix or t.startswith(f"{prefix}.")]
    for start in range(0, len(names), 500):  # (in slices: one request each)
        for future in admin.delete_topics(names[start:start + 500],
                                          operation_timeout=120).values():
            future.result(180)
    deadline = time.monotonic() + 180
    while log_dir is not None and time.monotonic() < deadline and any(
            d.name.endswith("-delete") for d in log_dir.iterdir()):
        time.sleep(0.5)
    return len(names)
