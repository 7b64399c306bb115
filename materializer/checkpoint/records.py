"""Every record the job reads in its checkpoint, in one place (no Spark).

casscade's own, beside Spark's files, and the checks a start makes against them: the
partition stores' job id, the raw topic's partition count, whose job it is (the Kafka
cluster and topic prefix it reads), and the events.delivery it last ran with. Spark's own,
read by `casscade materializer reshard` and the tests while the job is stopped: which
micro-batch it last committed, and the Kafka offsets that batch ended at (its commit and
offset logs).
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterable
from typing import TYPE_CHECKING

from materializer.store.layout import STATE_DIR
from shared import topic_names

if TYPE_CHECKING:
    from materializer.checkpoint.files import Files

# casscade's records
OWNER_RECORD = f"{STATE_DIR}/owner.json"  # the Kafka cluster id and topic prefix it reads
CHANGELOG_RECORD = f"{STATE_DIR}/changelog.json"  # the stores' job id
PARTITIONS_RECORD = f"{STATE_DIR}/partitions.json"  # the raw topic's partition count
DELIVERY_RECORD = f"{STATE_DIR}/delivery.json"  # events.delivery of the last start


def job_id(files: Files) -> str:
    """The id of a checkpoint's partition stores, in their changelog topics' names: made
    the first time the checkpoint runs, then read back."""
    known = recorded_job_id(files)
    if known is not None:
        return known
    made = new_job_id()
    write_job_id(files, made)
    return made


def recorded_job_id(files: Files) -> str | None:
    """The stores' job id the checkpoint records, None before its first run."""
    text = files.read_text(CHANGELOG_RECORD)
    return None if text is None else str(json.loads(text)["job_id"])


def new_job_id() -> str:
    """A new id for a checkpoint's partition stores (a first run, or a reshard)."""
    return uuid.uuid4().hex[:12]


def write_job_id(files: Files, job: str) -> None:
    """Record `job` as the id of the checkpoint's partition stores."""
    files.write_text(CHANGELOG_RECORD, json.dumps({"job_id": job}))


def partition_counts(files: Files) -> dict[str, int] | None:
    """{raw topic: partition count} as the checkpoint records it, None before its first
    run."""
    text = files.read_text(PARTITIONS_RECORD)
    return None if text is None else json.loads(text)


def write_partition_counts(files: Files, counts: dict[str, int]) -> None:
    """Record the raw topics' partition counts."""
    files.write_text(PARTITIONS_RECORD, json.dumps(counts, sort_keys=True))


class CheckpointRefused(Exception):
    """The partition stores cannot run with this checkpoint or these raw topics."""


# Spark writes each file of its offset and commit logs as a hidden temporary file first and
# renames it into place: `.<batch>.<uuid>.tmp`, with a local file system's checksum file
# `..<batch>.<uuid>.tmp.crc` beside it
_SPARK_TEMP = re.compile(r"\.\.?\d+\.[0-9a-f-]+\.tmp(\.crc)?")
_LOGS = ("offsets", "commits")


def clear_unfinished_start(files: Files) -> list[str]:
    """Remove the temporary files a driver stopped while writing the query's first offsets
    left in the checkpoint's logs (never renamed into place, so never part of them), while
    no batch was ever planned: Spark takes any file there at batch 0 for another query's
    and refuses to start, every time (STATE_STORE_CHECKPOINT_LOCATION_NOT_EMPTY). Returns
    what it removed."""
    if any(name.isdigit() for log in _LOGS for name in files.names(log)):
        return []  # a batch was planned: Spark itself ignores temporary files from here on
    removed = []
    for log in _LOGS:
        for name in files.names(log):
            if _SPARK_TEMP.fullmatch(name):
                files.delete(f"{log}/{name}")
                removed.append(f"{log}/{name}")
    return removed


def check_start(files: Files, started: bool, partitions: dict[str, int], prefix: str) -> None:
    """Refuse what the partition stores cannot follow: a checkpoint an earlier casscade
    started in its spark state mode or for its per-table raw topics, or a raw topic with
    more partitions than when its state was first written (its keys moved). Records the raw
    topic's partition count for the next start (`partitions`: {raw topic: count}, empty
    while it does not exist)."""
    where = f"checkpoint {files.location}"
    if started and not files.exists(STATE_DIR):
        raise CheckpointRefused(
            f"{where}: this checkpoint was started in the spark state mode (Spark's state "
            "store), which this casscade no longer has; start a new spark.checkpoint with "
            "kafka.starting_offsets earliest (docs/operations.md \"Upgrading from the "
            "spark state mode\")")
    known = partition_counts(files) or {}
    old = topic_names.per_table_raw_topics(prefix, set(known))
    if old:
        raise CheckpointRefused(
            f"{where} was written for the per-table raw topics of an earlier casscade "
            f"({topic_names.first_and_more(old)}), which this "
            f"one does not read: start a new spark.checkpoint, and publish the tables' rows "
            f"again with `casscade snapshot` (docs/operations.md \"One raw topic\")")
    grown = {t: (known[t], n) for t, n in partitions.items() if t in known and n != known[t]}
    if grown:
        raise CheckpointRefused(
            f"{where}: the raw topic changed its partition count since its state was "
            f"written, so its keys moved between partition stores: "
            + ", ".join(f"{t} {a} -> {b}" for t, (a, b) in sorted(grown.items()))
            + "; give it its new count with `casscade materializer reshard`, which moves "
            "the stores with their keys (docs/operations.md \"State without shuffles\")")
    write_partition_counts(files, known | partitions)


def check_owner(files: Files, cluster: str | None, prefix: str) -> None:
    """Refuse a checkpoint another job wrote (another Kafka cluster or topic prefix): its
    offsets and stores mean nothing here. Records this job's on its first start."""
    text = files.read_text(OWNER_RECORD)
    if text is None:
        mine = {"kafka_cluster": cluster, "topic_prefix": prefix}
        files.write_text(OWNER_RECORD, json.dumps(mine, sort_keys=True))
        return
    refuse_another_owner(files.location, text, cluster, prefix)


def refuse_another_owner(location: str, owner_text: str, cluster: str | None,
                         prefix: str) -> None:
    """CheckpointRefused if a checkpoint's owner record (`owner_text`, OWNER_RECORD's
    text) names another job than this one (the CLI checks a local checkpoint's before
    Spark starts)."""
    mine = {"kafka_cluster": cluster, "topic_prefix": prefix}
    theirs = json.loads(owner_text)
    if theirs != mine:
        raise CheckpointRefused(
            f"checkpoint {location} belongs to the job that reads "
            f"{topic_names.raw_topic(theirs['topic_prefix'])} on Kafka cluster "
            f"{theirs['kafka_cluster']}; this config reads {topic_names.raw_topic(prefix)} on "
            f"Kafka cluster {cluster}: give this job a "
            "spark.checkpoint of its own")


def check_delivery(files: Files, delivery: str) -> None:
    """Refuse a change of events.delivery while a micro-batch of the other mode is
    unfinished; record this start's. Why: Spark runs an unfinished batch again. Under
    exactly-once a rerun skips what its first run committed, under at-least-once it writes
    it all again; so a batch begun at-least-once and finished exactly-once is written
    twice, and one begun exactly-once and finished at-least-once can meet transactions
    its first run left open (its stores read changelogs up to them). Between batches
    the modes share everything else, so a switch there is safe."""
    text = files.read_text(DELIVERY_RECORD)
    recorded = None if text is None else str(json.loads(text)["delivery"])
    planned = last_batch(files.names("offsets"))
    unfinished = planned is not None and planned != last_batch(files.names("commits"))
    if recorded is None and unfinished:
        # (every start since the record exists writes it before the first batch: a
        # checkpoint of an earlier casscade, or the file removed)
        raise CheckpointRefused(
            f"checkpoint {files.location}: micro-batch {planned} did not finish, and the "
            f"checkpoint does not say which events.delivery began it (no {DELIVERY_RECORD}"
            "). Finished in the other mode, it would write its events twice or meet its "
            "open transactions. Finish it with the casscade that began it (--available-"
            f"now), or write the mode it ran with to {DELIVERY_RECORD} in the checkpoint, "
            'e.g. {"delivery": "exactly-once"}, and start again')
    if recorded is not None and recorded != delivery and unfinished:
        raise CheckpointRefused(
            f"checkpoint {files.location}: micro-batch {planned} began with "
            f"events.delivery {recorded} and did not finish; finishing it with "
            f"{delivery} would write its events twice or meet its open transactions. "
            f"Run the job once with events.delivery {recorded} and --available-now "
            f"(it finishes every batch, then stops), then start it with {delivery}")
    if recorded != delivery:
        files.write_text(DELIVERY_RECORD, json.dumps({"delivery": delivery}))


# Spark's logs: commits/<batch> once a micro-batch is done, offsets/<batch> when it is planned
class CheckpointLogError(ValueError):
    """A checkpoint's commit or offset log is missing or not what Spark writes."""


def last_batch(names: Iterable[str]) -> int | None:
    """The highest micro-batch id among the file names of a commit or offset log (Spark
    names each entry by its batch id), None if there is none."""
    ids = [int(name) for name in names if name.isdigit()]
    return max(ids) if ids else None


def parse_offset_log(text: str) -> tuple[dict[str, str], list[dict | None]]:
    """An offsets/<batch> file: (the batch's SQL conf, one offset per source; None for a
    source with no offset). Format: "v1", the metadata JSON, then one line per source."""
    lines = text.splitlines()
    if not lines or not re.fullmatch(r"v\d+", lines[0]) or len(lines) < 2:
        raise CheckpointLogError("not a Structured Streaming offset log entry")
    conf = json.loads(lines[1]).get("conf", {})
    sources = [None if line.strip() == "-" else json.loads(line) for line in lines[2:]]
    return conf, sources
