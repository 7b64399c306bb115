"""The partition stores' changelog topics on the real broker (materializer.kafka.changelog)."""

from __future__ import annotations

import uuid

import pytest

from materializer.kafka.changelog import Changelogs
from shared.topic_names import changelog_topic, raw_topic

pytestmark = pytest.mark.integration


def test_a_tasks_changelog_ends_read_at_once_equal_each_partitions_own(stack):
    """ends() reads every partition of a fresh changelog topic in one go; each equals
    what the partition's own end() reads, and a partition handed its end uses it once."""
    prefix = f"cl{uuid.uuid4().hex[:6]}"
    logs = Changelogs({"bootstrap.servers": stack.bootstrap_servers}, prefix, "job1", 1)
    raw = raw_topic(prefix)
    made = logs.ensure(12)
    assert made == {changelog_topic(prefix, "job1"): 12}
    for p in range(12):
        for i in range(p % 4):  # some partitions empty, some with a few writes
            logs.partition(raw, p).write(f"k{i}".encode(), b"v")
    logs.flush()
    ends = logs.ends(made)
    assert set(ends) == {(t, p) for t, n in made.items() for p in range(n)}
    for (topic, p), end in ends.items():
        assert end == logs.end(topic, p)
    assert sorted(set(ends.values())) == [0, 1, 2, 3]

    topic = changelog_topic(prefix, "job1")
    handed = logs.partition(raw, 1, {(topic, 1): 99})  # not the real end: shows it is used
    assert handed.end() == 99
    assert handed.end() == ends[(topic, 1)]  # then read from the broker again
    assert logs.ends({}) == {}
