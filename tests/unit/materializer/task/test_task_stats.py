"""materializer.task.task_stats: a partition's stats, added to its task's, and read back
from the JSON committed with its batch (what a replay that skips the partition reports)."""

from __future__ import annotations

import json

from materializer.task.task_stats import TaskStats


def _seen() -> TaskStats:
    stats = TaskStats()
    stats.event("ks.t", 0.3)
    stats.event("ks.t", 7.0)
    stats.heartbeat("node1", 1_000)
    stats.drop("ks.gone", 4)
    stats.truncate("ks.cut", 2)
    stats.late, stats.covered = 3, 1
    return stats


def test_the_json_reads_back_as_the_same_stats() -> None:
    seen = _seen()
    text = seen.to_json()
    assert text is not None
    assert TaskStats.from_json(text).to_json() == text


def test_partitions_add_up_to_their_task() -> None:
    task = TaskStats()
    task.producer(0.5)
    task.add(_seen())
    task.add(TaskStats.from_json(_seen().to_json() or ""))
    body = json.loads(task.to_json() or "")
    fresh = body["fresh"]["ks.t"]
    assert sum(fresh[:-1]) == 4 and fresh[-1] == 14.6  # counts, then the sum of ages
    assert body["beats"] == {"node1": 1_000}
    assert (body["dropped"], body["late"]) == ({"ks.gone": 8}, 6)
    assert (body["truncated"], body["covered"]) == ({"ks.cut": 4}, 2)
    assert body["txn"][:2] == [1, 0.5]
