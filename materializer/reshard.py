"""Re-sharding a stopped job's partition stores for a raw topic with more partitions
(`casscade materializer reshard`): every key's store entries move to the store of the
partition its raw records go to now, through a new changelog topic.

Why offline, after a drain: a key's raw records go to partition crc32(key) % n (the
publishers' partitioner); once n changes, its new records go elsewhere, while records
already in the old partition would still be read by the old partition's task. With the
publishers stopped and the job run to the end of the raw topics, there are no such records,
so each key's state can move in one step, and no event is emitted or lost by the move.

Raw partitions added by hand (outside reshard): the job refuses to start, and the stores can
still move if every record not yet processed is in its key's partition for the count the
topic has now (written after the partitions were added): those records then meet the
moved state in order.

The steps, each safe to run again if one fails: the new changelog topic (a new job id)
takes every store's entries at their new partitions; the raw topic gains partitions; the
checkpoint's records name the new job id and partition count; this machine's old stores
go (they are rebuilt from the new changelog where tasks run). The old changelog topic is
left for the operator to delete.
"""

from __future__ import annotations

import logging
import shutil
import uuid
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from materializer.checkpoint import records
from materializer.checkpoint.files import Files, is_uri
from materializer.checkpoint.records import last_batch, parse_offset_log
from materializer.kafka.start_topics import raw_partitions
from materializer.store.layout import SWEEP, SWEPT, raw_key_of, state_root
from materializer.store.partition_store import entry_value, owner_of
from shared.partitioner import partitioner as partition_function
from shared.topic_names import changelog_topic

log = logging.getLogger(__name__)


class ReshardRefused(Exception):
    """The checkpoint, the raw topics or the settings do not allow a reshard; the message
    says why."""


def committed_offsets(files: Files) -> dict[str, dict[int, int]]:
    """The raw offsets the last committed micro-batch ended at; refused while a batch is
    planned but not committed (the job runs, or stopped mid-batch)."""
    where = files.location
    batch = last_batch(files.names("commits"))
    if batch is None:
        raise ReshardRefused(f"{where}: no committed micro-batch")
    planned = last_batch(files.names("offsets"))
    if planned != batch:
        raise ReshardRefused(f"{where}: micro-batch {planned} is planned but not committed "
                             "(stop the job, then run it with --available-now to its end)")
    _conf, sources = parse_offset_log(files.read_text(f"offsets/{batch}") or "")
    return {t: {int(p): int(o) for p, o in parts.items()}
            for t, parts in (sources[0] or {}).items()}


def undrained(ends: dict[str, dict[int, int]], done: dict[str, dict[int, int]]
              ) -> dict[str, int]:
    """Raw records not yet processed, per topic (`ends`: each partition's end offset)."""
    left = {t: sum(max(0, end - done.get(t, {}).get(p, 0)) for p, end in parts.items())
            for t, parts in ends.items()}
    return {t: n for t, n in left.items() if n}


def strays(records: Iterable[tuple[int, int, bytes]], partitions: int,
           partition_of: Any) -> list[tuple[int, int]]:
    """(partition, offset) of each unprocessed raw record (partition, offset, key) that is
    not in its key's partition for `partitions` partitions: written before partitions were
    added, its key's state would move away from it."""
    return [(p, o) for p, o, key in records if partition_of(key, partitions) != p]


def reshard_entries(entries: dict[int, dict[bytes, bytes]], partitions: int,
                    partition_of: Any) -> dict[int, dict[bytes, bytes]]:
    """The stores' writes (old partition → key → value, as their changelogs end) laid out
    for `partitions` partitions: each entry and expiry at its key's partition, each store's
    own records (its newest batch) in every new store, the newest one kept."""
    out: dict[int, dict[bytes, bytes]] = defaultdict(dict)
    shared: dict[bytes, bytes] = {}
    for old, store in entries.items():
        for key, value in store.items():
            owner = owner_of(key)
            if owner is None:
                shared[key] = max(shared.get(key, value), value)  # big-endian batch ids
                continue
            kind, inner = owner
            if kind == "entry" and inner[:1] in (SWEEP, SWEPT):
                # a sweep's cursor is a place in one partition's keys: it cannot move
                if inner[:1] == SWEEP and entry_value(value) is not None:
                    raise ReshardRefused(
                        f"partition {old}'s store has a table sweep under way (a TRUNCATE's, "
                        "a reset's or a truncate barrier's, spark.sweep_keys keys a "
                        "micro-batch): run the publishers and the job a while longer (the "
                        "heartbeats give every partition a micro-batch, each taking the "
                        "sweep on), then drain and reshard again")
                continue  # (a finished sweep's, or its marks: the old layout's own)
            pk = raw_key_of(inner) if kind == "entry" else inner
            out[partition_of(pk, partitions)][key] = value
    for p in range(partitions):
        out[p].update(shared)
    return dict(out)


def reshard(kafka: dict[str, str], prefix: str, files: Files,
            partitions: int, partitioner: str, replication: int) -> dict[str, Any]:
    """Move a stopped, drained checkpoint's partition stores to raw topics of
    `partitions` partitions (ReshardRefused when it may not); a report of what moved.
    `files`: the checkpoint's (a local path's stores, beside it, go; a URI's live in the
    executors' work directories, by job id, and are rebuilt under the new one)."""
    from confluent_kafka.admin import AdminClient, NewPartitions

    from materializer.kafka.changelog import Changelogs
    from shared.kafka_topics import read_to_end

    known = records.partition_counts(files)
    old_id = records.recorded_job_id(files)
    if known is None or old_id is None:
        raise ReshardRefused(f"{files.location}: not a checkpoint of the partition stores "
                             "with changelogs (run the job on it first)")
    partition_of = partition_function(partitioner)
    fewer = {t: n for t, n in known.items() if n > partitions}
    if fewer:
        raise ReshardRefused(f"a raw topic with more than {partitions} partitions (Kafka "
                             f"cannot take partitions away): {fewer}")
    admin = AdminClient(kafka)
    current = raw_partitions(kafka, prefix)
    ends = _ends(kafka, current)
    done = committed_offsets(files)
    left = undrained(ends, done)
    by_hand = {t: n for t, n in current.items() if n > known.get(t, n)}
    if left and by_hand:
        _check_grown_by_hand(kafka, by_hand, partitions, ends, done, partition_of)
        left = {}
    if left:
        raise ReshardRefused(f"raw records not processed yet: {left}; stop the publishers, "
                             "run the job with --available-now to its end, then reshard")
    new_id = records.new_job_id()
    new_logs = Changelogs(kafka, prefix, new_id, replication)
    new_logs.ensure(partitions)
    moved = 0
    for topic, n in sorted(known.items()):  # one: the raw topic
        old = changelog_topic(prefix, old_id)
        entries: dict[int, dict[bytes, bytes]] = defaultdict(dict)
        for msg in read_to_end(kafka, old):
            if msg.value() is None:
                entries[msg.partition()].pop(msg.key(), None)
            else:
                entries[msg.partition()][msg.key()] = msg.value()
        new = changelog_topic(prefix, new_id)
        for p, writes in reshard_entries(entries, partitions, partition_of).items():
            for key, value in writes.items():
                new_logs.write(new, p, key, value)
                moved += 1
        new_logs.flush()
        log.info("store entries moved", extra={"topic": topic, "from_partitions": n,
                                               "to_partitions": partitions})
    grow = {t: NewPartitions(t, partitions) for t, n in current.items() if n < partitions}
    for future in (admin.create_partitions(list(grow.values())).values() if grow else ()):
        future.result(timeout=60)
    records.write_job_id(files, new_id)
    records.write_partition_counts(files, {t: partitions for t in known}
                                   | {t: partitions for t in current})
    if not is_uri(files.location):  # a local master's stores
        root = state_root(Path(files.location))
        for store_dir in (d for d in root.iterdir() if d.is_dir()):
            shutil.rmtree(store_dir)  # rebuilt from the new changelogs where tasks run
    return {"raw_topics": {t: [n, partitions] for t, n in sorted(known.items())},
            "entries_written": moved, "job_id": new_id,
            "old_changelog_topics": [changelog_topic(prefix, old_id)]}


def _check_grown_by_hand(kafka: dict[str, str], grown: dict[str, int], partitions: int,
                         ends: dict[str, dict[int, int]], done: dict[str, dict[int, int]],
                         partition_of: Any) -> None:
    """A raw topic given partitions outside reshard, with records since: the stores can
    move to the count it has now if every record not yet processed is in its key's
    partition for that count (then it was written after the partitions were added, or its
    key did not move). ReshardRefused otherwise, naming what stands in the way."""
    from confluent_kafka import Consumer

    from shared.kafka_topics import read_range

    for topic, count in grown.items():
        if partitions != count:
            raise ReshardRefused(
                f"{topic} was given {count} partitions outside reshard: reshard it to that "
                f"count first (--partitions {count}), then to {partitions}")
        consumer = Consumer(kafka | {"group.id": f"casscade-reshard-{uuid.uuid4().hex[:8]}",
                                     "enable.auto.commit": False})
        try:
            unread = ((p, msg.offset(), msg.key() or b"")
                      for p, end in ends[topic].items()
                      for msg in read_range(consumer, topic, p, done.get(topic, {}).get(p, 0),
                                            end))
            found = strays(unread, count, partition_of)
        finally:
            consumer.close()
        if found:
            raise ReshardRefused(
                f"{topic} was given {count} partitions outside reshard, and {len(found)} "
                f"records written before that are not processed yet (the first: partition "
                f"{found[0][0]}, offset {found[0][1]}): their keys' state would move away "
                "from them. The state has to be built again: docs/operations.md \"Raw "
                "partitions added by hand\"")
        log.info("raw partitions added by hand: every record left is in its key's "
                 "partition", extra={"topic": topic, "partitions": count})


def _ends(kafka: dict[str, str], counts: dict[str, int]) -> dict[str, dict[int, int]]:
    """Each raw topic partition's end offset."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(kafka | {"group.id": f"casscade-reshard-{uuid.uuid4().hex[:8]}",
                                 "enable.auto.commit": False})
    try:
        return {t: {p: consumer.get_watermark_offsets(TopicPartition(t, p), timeout=30)[1]
                    for p in range(n)} for t, n in counts.items()}
    finally:
        consumer.close()
