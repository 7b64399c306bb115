"""What one task of the merge saw beyond its counts: its events' freshness per table, its
publishers' heartbeats, the state it freed of dropped and truncated tables (one JSON column
of the task's output row; the driver adds them up in `materializer.spark.progress`)."""

from __future__ import annotations

import json
from typing import Any

from shared.metrics import bucket_of

# write time -> event written, in seconds: a second or two is healthy, minutes are not
FRESHNESS_BUCKETS_S = (0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0)


class TaskStats:
    """What one task saw: its events' freshness per table, its publishers' heartbeats, the
    entries it freed of dropped tables and their late records it left out."""

    def __init__(self) -> None:
        self.fresh: dict[str, list[float]] = {}  # table → counts per bucket (+Inf), then sum
        self.beats: dict[str, int] = {}  # publisher host → its newest heartbeat's clock (ms)
        self.dropped: dict[str, int] = {}  # dropped table → store entries freed
        self.late = 0  # records of tables dropped in an earlier batch, not merged
        self.truncated: dict[str, int] = {}  # truncated table → keys it gave events
        self.covered = 0  # records all of whose writes a truncation removed, not merged
        self.dead: dict[str, int] = {}  # topic a dead letter was meant for → how many
        # exactly-once: producers initialised and their seconds; transaction commits (each
        # reported by its Python worker's next task: a task's own commits come after its
        # row of counts), their seconds, and the topics those transactions wrote
        self.txn: list[float] = [0, 0.0, 0, 0.0, 0]

    def event(self, table: str, age_s: float) -> None:
        """An event of `table` written `age_s` after its change's write time."""
        counts = self.fresh.get(table)
        if counts is None:
            counts = self.fresh[table] = [0.0] * (len(FRESHNESS_BUCKETS_S) + 2)
        counts[bucket_of(FRESHNESS_BUCKETS_S, age_s)] += 1
        counts[-1] += age_s

    def heartbeat(self, host: str, at_ms: int) -> None:
        """A heartbeat from `host`, sent at its clock's `at_ms`."""
        if at_ms > self.beats.get(host, 0):
            self.beats[host] = at_ms

    def drop(self, table: str, entries: int) -> None:
        """`table` was dropped: `entries` of its store entries freed in this task."""
        self.dropped[table] = self.dropped.get(table, 0) + entries

    def truncate(self, table: str, keys: int) -> None:
        """`table` was truncated: `keys` of its keys got events (rows removed) in this task."""
        self.truncated[table] = self.truncated.get(table, 0) + keys

    def dead_letter(self, topic: str, count: int = 1) -> None:
        """`count` records meant for `topic` went to the dead-letter topic instead."""
        if count:
            self.dead[topic] = self.dead.get(topic, 0) + count

    def producer(self, init_s: float) -> None:
        """A transactional producer was initialised, in `init_s`."""
        self.txn[0] += 1
        self.txn[1] += init_s

    def committed(self, commit_s: float, topics: int) -> None:
        """A transaction of `topics` topics committed in `commit_s` (its wait for the
        broker)."""
        self.txn[2] += 1
        self.txn[3] += commit_s
        self.txn[4] += topics

    def add(self, other: TaskStats) -> None:
        """Add what `other` saw (a raw partition of this task, or one it replays)."""
        for table, counts in other.fresh.items():
            mine = self.fresh.setdefault(table, [0.0] * len(counts))
            for i, count in enumerate(counts):
                mine[i] += count
        for host, at_ms in other.beats.items():
            self.heartbeat(host, at_ms)
        for table, entries in other.dropped.items():
            self.drop(table, entries)
        for table, keys in other.truncated.items():
            self.truncate(table, keys)
        for topic, count in other.dead.items():
            self.dead_letter(topic, count)
        self.late += other.late
        self.covered += other.covered
        self.txn = [mine + theirs for mine, theirs in zip(self.txn, other.txn, strict=True)]

    @classmethod
    def from_json(cls, text: str) -> TaskStats:
        """The stats `to_json` wrote."""
        body = json.loads(text)
        stats = cls()
        stats.fresh = {table: [float(n) for n in counts]
                       for table, counts in body.get("fresh", {}).items()}
        stats.beats = {host: int(at) for host, at in body.get("beats", {}).items()}
        stats.dropped = {t: int(n) for t, n in body.get("dropped", {}).items()}
        stats.truncated = {t: int(n) for t, n in body.get("truncated", {}).items()}
        stats.dead = {t: int(n) for t, n in body.get("dead", {}).items()}
        stats.late, stats.covered = int(body.get("late", 0)), int(body.get("covered", 0))
        stats.txn = [float(x) for x in body.get("txn", stats.txn)]
        return stats

    def to_json(self) -> str | None:
        """The task's stats for the observed metrics (None: nothing seen)."""
        if not (self.fresh or self.beats or self.dropped or self.late or self.truncated
                or self.covered or self.dead or any(self.txn)):
            return None
        body: dict[str, Any] = {"fresh": self.fresh, "beats": self.beats}
        if self.dropped or self.late:
            body |= {"dropped": self.dropped, "late": self.late}
        if self.truncated or self.covered:
            body |= {"truncated": self.truncated, "covered": self.covered}
        if self.dead:
            body["dead"] = self.dead
        if any(self.txn):
            body["txn"] = [round(x, 4) for x in self.txn]
        return json.dumps(body, separators=(",", ":"))

