"""Reading a stopped Structured Streaming query's checkpoint logs (no Spark): which
micro-batch it last committed and the Kafka offsets that batch ended at."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable


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
