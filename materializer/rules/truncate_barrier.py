"""The truncate barrier's bookkeeping (pure): the records of `<prefix>.truncations` and
when a table's truncate events are due.

A table's truncate event (`op: t`) may go into its event topic only where no event of a
write the truncation removed can follow it, and every partition of the topic must get one
(a consumer may read any of them). Every raw partition's task applies a truncation on its
own, when it meets the publishers' table-truncated record, and then reports it here
(`applied`, in the transaction that applied it). Once every raw partition has reported a
table, the driver writes its truncate events, a `written` record here and a barrier to
every raw partition in one transaction (`materializer.kafka.truncate_barrier`); each task
that meets the barrier writes the table's live rows again, after the truncate events.

Each replica's publisher reports its own node's truncation time, milliseconds to seconds
apart for one TRUNCATE, and a publisher that was down reports later still. One TRUNCATE
gets one truncate event: a table's next is due only when every partition has applied a
truncation more than TRUNCATE_WINDOW_US after the last one written. (The rows the later
times remove still get their `d` events, key by key.) A reset (`snapshot --reset`) has one
record per partition, not one per replica: its truncate events are due whenever every
partition has applied it, however soon after the last.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field

# Cassandra's truncate_request_timeout (default 60 s): a TRUNCATE's replicas truncate
# within it, so truncation times further apart are two TRUNCATEs
TRUNCATE_WINDOW_US = 60_000_000
_APPLIED, _WRITTEN = "applied", "written"


@dataclass(frozen=True)
class Applied:
    """A raw partition's store of job `job` applied a table's truncations up to `floor_us`."""

    job: str
    table_id: uuid.UUID
    keyspace: str
    table: str
    floor_us: int
    topic: str
    partition: int
    schema_hash: str | None = None  # a version of the table the store holds keys of
    reset: bool = False  # an operator's reset of the table, not a TRUNCATE

    def record(self) -> tuple[bytes, bytes]:
        """Its (key, value) in the truncations topic (one key per job, table and partition:
        compaction keeps the newest)."""
        key = f"{_APPLIED}/{self.job}/{self.table_id}/{self.topic}/{self.partition}"
        body = {"job": self.job, "table_id": str(self.table_id), "keyspace": self.keyspace,
                "table": self.table, "floor_us": self.floor_us, "topic": self.topic,
                "partition": self.partition, "schema_hash": self.schema_hash,
                "reset": self.reset}
        return key.encode(), json.dumps(body, sort_keys=True).encode()


@dataclass(frozen=True)
class Written:
    """A table's truncate events were written for its truncations up to `floor_us`."""

    table_id: uuid.UUID
    keyspace: str
    table: str
    floor_us: int
    at_ms: int = 0  # when

    @property
    def name(self) -> str:
        """keyspace.table"""
        return f"{self.keyspace}.{self.table}"

    def record(self) -> tuple[bytes, bytes]:
        """Its (key, value) in the truncations topic (one key per table)."""
        body = {"table_id": str(self.table_id), "keyspace": self.keyspace,
                "table": self.table, "floor_us": self.floor_us, "at_ms": self.at_ms}
        return (f"{_WRITTEN}/{self.table_id}".encode(),
                json.dumps(body, sort_keys=True).encode())


@dataclass
class Due:
    """A table whose truncate events are due: at `floor_us`, rendered with `schema_hash`
    (None: no store holds a key of it, so no consumer holds a row of it either)."""

    written: Written
    schema_hash: str | None


@dataclass
class TruncationProgress:
    """What the truncations topic says, read record by record: each raw partition's applied
    floor per table (this job's), and each table's last truncate events written."""

    job: str
    applied: dict[uuid.UUID, dict[tuple[str, int], Applied]] = field(default_factory=dict)
    written: dict[uuid.UUID, int] = field(default_factory=dict)

    def add(self, key: bytes | None, value: bytes | None) -> None:
        """Take one record of the topic (ValueError, KeyError or TypeError: not one)."""
        if key is None or value is None:
            return  # (compaction's tombstones: none are written)
        kind = key.decode().split("/", 1)[0]
        body = json.loads(value)
        if kind == _WRITTEN:
            table_id = uuid.UUID(body["table_id"])
            self.written[table_id] = max(self.written.get(table_id, 0), int(body["floor_us"]))
        elif kind == _APPLIED and body["job"] == self.job:
            a = Applied(body["job"], uuid.UUID(body["table_id"]), str(body["keyspace"]),
                        str(body["table"]), int(body["floor_us"]), str(body["topic"]),
                        int(body["partition"]), body.get("schema_hash"),
                        bool(body.get("reset", False)))
            by_partition = self.applied.setdefault(a.table_id, {})
            old = by_partition.get((a.topic, a.partition))
            if old is None or a.floor_us >= old.floor_us:
                by_partition[(a.topic, a.partition)] = (
                    a if a.schema_hash or old is None
                    else Applied(**{**a.__dict__, "schema_hash": old.schema_hash}))

    def due(self, partitions: Iterable[tuple[str, int]], now_ms: int) -> list[Due]:
        """The tables whose truncate events are due, given the raw partitions there are:
        every one of them has applied a truncation of the table newer than its last truncate
        events by more than the window (a reset: newer)."""
        wanted = set(partitions)
        out = []
        for table_id, by_partition in self.applied.items():
            if not wanted or not wanted <= by_partition.keys():
                continue
            reports = [by_partition[p] for p in wanted]
            floor = min(a.floor_us for a in reports)
            last = self.written.get(table_id)
            window = 0 if all(a.reset for a in reports) else TRUNCATE_WINDOW_US
            if last is not None and floor <= last + window:
                continue
            first = reports[0]
            hashes = [a.schema_hash for a in reports if a.schema_hash]
            out.append(Due(Written(table_id, first.keyspace, first.table, floor, now_ms),
                           hashes[0] if hashes else None))
        return out

    def wrote(self, written: Written) -> None:
        """Note truncate events written (before their record is read back)."""
        self.written[written.table_id] = max(self.written.get(written.table_id, 0),
                                             written.floor_us)
