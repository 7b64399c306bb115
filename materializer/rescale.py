"""Moving a checkpoint's state to more state partitions: what the old checkpoint says and
whether the move may go ahead (no Spark here; `materializer.spark.rescale_state` does the Spark
side, `casscade materializer rescale` puts them together).

Spark fixes the number of state partitions (spark.sql.shuffle.partitions) when a stateful
query's checkpoint is created and ignores the setting on every restart. The way out is a new
checkpoint whose first micro-batch is seeded with the old one's state (transformWithState's
initialState) and whose Kafka source starts exactly where the old query's last committed
micro-batch ended, so no raw record is processed twice and none is skipped.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

EARLIEST = -2  # Spark's startingOffsets value for "from the start of the partition"
SHUFFLE_CONF = "spark.sql.shuffle.partitions"


class RescaleRefused(Exception):
    """The checkpoints or settings do not allow a rescale; the message says why."""


@dataclass(frozen=True)
class OldCheckpoint:
    """What a stopped job's checkpoint holds: its last committed micro-batch, the state
    partitions it was created with, and the Kafka offsets that batch ended at."""

    path: Path
    batch: int
    partitions: int
    offsets: dict[str, dict[str, int]]  # topic -> partition (as text) -> next offset


def last_commit(checkpoint: Path) -> int | None:
    """The id of the last micro-batch in the checkpoint's commit log, None if there is none."""
    commits = checkpoint / "commits"
    if not commits.is_dir():
        return None
    ids = [int(p.name) for p in commits.iterdir() if p.name.isdigit()]
    return max(ids) if ids else None


def parse_offset_log(text: str) -> tuple[dict[str, str], list[dict | None]]:
    """An offsets/<batch> file: (the batch's SQL conf, one offset per source; None for a
    source with no offset). Format: "v1", the metadata JSON, then one line per source."""
    lines = text.splitlines()
    if not lines or not re.fullmatch(r"v\d+", lines[0]) or len(lines) < 2:
        raise RescaleRefused("not a Structured Streaming offset log entry")
    conf = json.loads(lines[1]).get("conf", {})
    sources = [None if line.strip() == "-" else json.loads(line) for line in lines[2:]]
    return conf, sources


def read_old_checkpoint(path: Path) -> OldCheckpoint:
    """The old checkpoint's last committed batch, partitions and end offsets; refused when it
    is missing, has no committed micro-batch, or is not a one-source Kafka query's."""
    if not path.is_dir():
        raise RescaleRefused(f"{path}: no such checkpoint directory")
    batch = last_commit(path)
    if batch is None:
        raise RescaleRefused(f"{path}: no committed micro-batch (empty, or not a checkpoint)")
    log = path / "offsets" / str(batch)
    if not log.is_file():
        raise RescaleRefused(f"{path}: micro-batch {batch} is committed but its offsets "
                             f"entry is missing")
    conf, sources = parse_offset_log(log.read_text())
    if len(sources) != 1 or not isinstance(sources[0], dict):
        raise RescaleRefused(f"{path}: expected one Kafka source in offsets/{batch}, "
                             f"found {len(sources)}")
    if not (path / "state" / "0").is_dir():
        raise RescaleRefused(f"{path}: no state of operator 0 (not a materializer checkpoint)")
    partitions = conf.get(SHUFFLE_CONF)
    if partitions is None:  # written by a Spark that did not record it: count the stores
        partitions = sum(p.name.isdigit() for p in (path / "state" / "0").iterdir())
    offsets = {t: {p: int(o) for p, o in parts.items()} for t, parts in sources[0].items()}
    return OldCheckpoint(path, batch, int(partitions), offsets)


def is_empty_checkpoint(path: Path) -> bool:
    """True when `path` does not exist or is an empty directory (nothing to overwrite)."""
    return not path.exists() or (path.is_dir() and not any(path.iterdir()))


def check_rescale(old: OldCheckpoint, new_checkpoint: Path, new_partitions: int) -> None:
    """Refuse (RescaleRefused) unless the new checkpoint is empty and has at least as many
    state partitions as the old one."""
    if new_checkpoint.resolve() == old.path.resolve():
        raise RescaleRefused("the new checkpoint must be another directory than the old one")
    if not is_empty_checkpoint(new_checkpoint):
        raise RescaleRefused(f"{new_checkpoint}: the new checkpoint is not empty (a rescale "
                             f"writes a fresh one; remove it or choose another path)")
    if new_partitions < old.partitions:
        raise RescaleRefused(f"spark.shuffle_partitions {new_partitions} is fewer than the "
                             f"old checkpoint's {old.partitions}: a rescale only adds state "
                             f"partitions")


def starting_offsets(committed: dict[str, dict[str, int]],
                     current: dict[str, int]) -> dict[str, dict[str, int]]:
    """startingOffsets for the new query: every partition the pattern matches now
    (`current`: topic -> partition count), at the old query's committed offset, or at the
    start for a topic or partition the old query never saw (as Spark itself reads newly
    discovered partitions). Spark requires every assigned partition to be named, and none
    else: a topic deleted since is left out."""
    out: dict[str, dict[str, int]] = {}
    for topic in sorted(current):
        seen = committed.get(topic, {})
        out[topic] = {str(p): seen.get(str(p), EARLIEST) for p in range(current[topic])}
    return out


def lost_partitions(committed: dict[str, dict[str, int]],
                    current: dict[str, int]) -> list[str]:
    """Topic-partitions the old query read that Kafka no longer has (deleted topics or
    partitions): their unread records are gone either way; reported, not refused."""
    return sorted(f"{t}-{p}" for t, parts in committed.items() for p in parts
                  if int(p) >= current.get(t, 0))
