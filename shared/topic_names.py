"""Every Kafka topic name casscade uses, and the raw topic's record key: the one owner of both.

The layout (docs/architecture.md "Raw records"):

- `<prefix>.raw`: every captured table's raw records, one topic for a cluster, so its
  partition count (and with it the materializer's tasks, stores and changelog partitions)
  does not grow with the tables. Keyed by table id + partition key.
- `<prefix>.schemas`: the table schemas the publishers decoded with (compacted).
- `<prefix>.<keyspace>.<table>`: a table's change events (one topic per table, as
  Debezium's consumers expect).
- `<prefix>.changelog.<job id>`: the materializer's partition stores (compacted), one
  partition per raw partition.
- `<prefix>.materializer.dead-letter`, `<prefix>.avro-schemas`: the defaults of their
  settings.

- `<prefix>.jobs`: the claim of the materializer job that holds the prefix's lease
  (compacted; `materializer.kafka.job_lease`).
- `<prefix>.truncations`: how far each raw partition's store has applied each table's
  truncations, and the truncate events written (compacted; `materializer.kafka.
  truncate_barrier`).

And names that are not a topic's: transactional ids, all under `casscade.<prefix>.`: each
raw partition's (exactly-once delivery), `casscade.<prefix>.<raw topic>.<partition>`, and
the job lease's, `casscade.<prefix>.job-lease`, and the truncate barrier's,
`casscade.<prefix>.truncations`.

Cassandra's keyspace and table names have no dots, so `<prefix>.raw.<keyspace>.<table>`
(the per-table raw topics of an earlier casscade) cannot be taken for any name here; such
topics are recognized, and refused by the materializer.
"""

from __future__ import annotations

import re
import uuid

TABLE_ID_SIZE = 16  # a raw key's leading table id (the UUID's 16 bytes)


def raw_topic(prefix: str) -> str:
    """`<prefix>.raw`: every captured table's raw records and the publishers' heartbeats."""
    return f"{prefix}.raw"


def raw_topic_regex(prefix: str) -> str:
    """Java/Python regex matching exactly the raw topic (Spark subscribes by pattern, so a
    raw topic made after the job started is read without a restart)."""
    return re.escape(raw_topic(prefix))


def per_table_raw_topics(prefix: str, topics: list[str] | set[str]) -> list[str]:
    """The topics of `topics` that are raw topics of the old per-table layout
    (`<prefix>.raw.<keyspace>.<table>`), sorted."""
    old = re.compile(re.escape(raw_topic(prefix)) + r"\.[^.]+\.[^.]+")
    return sorted(t for t in topics if old.fullmatch(t))


def first_and_more(topics: list[str]) -> str:
    """"a" or "a and 3 more": a sorted list of topics named in one line."""
    return topics[0] + (f" and {len(topics) - 1} more" if len(topics) > 1 else "")


def schema_topic(prefix: str) -> str:
    """`<prefix>.schemas` (compacted; key = schema hash)."""
    return f"{prefix}.schemas"


def event_topic(prefix: str, keyspace: str, table: str) -> str:
    """A table's change events: `<prefix>.<keyspace>.<table>`."""
    return f"{prefix}.{keyspace}.{table}"


def changelog_topic(prefix: str, job_id: str) -> str:
    """The partition stores' changelog of materializer job `job_id`: `<prefix>.changelog.
    <job id>` (a new checkpoint gets a new job id, so it never meets an old one's stores)."""
    return f"{prefix}.changelog.{job_id}"


def transactional_id_prefix(prefix: str) -> str:
    """What every transactional id of topic prefix `prefix` starts with (an ACL's prefix)."""
    return f"casscade.{prefix}."


def transactional_id(prefix: str, raw_topic: str, partition: int) -> str:
    """The Kafka transactional id of a raw partition (exactly-once delivery): one producer at
    a time may hold it, so a newer attempt fences older ones, of its own job or of another
    job on the prefix (whose commits then stop: `materializer.kafka.job_lease`)."""
    return f"{transactional_id_prefix(prefix)}{raw_topic}.{partition}"


def lease_transactional_id(prefix: str) -> str:
    """The transactional id of the prefix's job lease (a raw topic's name holds `.raw`, so
    no raw partition's id is this)."""
    return f"{transactional_id_prefix(prefix)}job-lease"


def truncations_topic(prefix: str) -> str:
    """`<prefix>.truncations`: the truncate barrier's progress (compacted)."""
    return f"{prefix}.truncations"


def truncations_transactional_id(prefix: str) -> str:
    """The transactional id of the prefix's truncate barrier (its truncate events)."""
    return f"{transactional_id_prefix(prefix)}truncations"


def job_topic(prefix: str) -> str:
    """`<prefix>.jobs`: the claim of the job holding the prefix's lease (compacted)."""
    return f"{prefix}.jobs"


def dead_letter_topic(prefix: str) -> str:
    """The materializer's dead letters, unless `events.dead_letter_topic` names another."""
    return f"{prefix}.materializer.dead-letter"


def avro_schema_topic(prefix: str) -> str:
    """Avro schemas by fingerprint (no registry), unless `events.avro_schema_topic` names
    another."""
    return f"{prefix}.avro-schemas"


def raw_key(table_id: uuid.UUID | bytes, partition_key: bytes) -> bytes:
    """A raw record's Kafka key: the table id's 16 bytes, then the partition key as Cassandra
    serializes it. Every replica's copy of a write has the same key, so all of them land in
    one partition; two tables' partitions with equal keys stay apart."""
    tid = table_id.bytes if isinstance(table_id, uuid.UUID) else table_id
    return tid + partition_key

