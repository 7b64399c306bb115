"""One table verified: its event topic against its rows, with rechecks of what is in flight.

The stream is read first, to its end; then the table is scanned and each row judged against
the key's latest image as it comes (rows are not kept unless they need a second look). Keys
that are not equal (pending, missing, extra or different) are looked at again after a grace
period: the stream is read on, their partitions are read again (by token), and they are
judged anew, up to `rechecks` times. What is still not equal then is the verdict.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import KafkaException

from casscade.verify.compare import EQUAL, PENDING, Report, TableRow, verdict
from casscade.verify.event_decoder import EventDecoder
from casscade.verify.keys import json_token
from casscade.verify.stream_images import StreamImages
from casscade.verify.table_rows import TableRows
from materializer.output.values import ValueModes
from shared.schema import TableSchema
from shared.table_scan import ScanProgress
from shared.topic_names import event_topic

log = logging.getLogger("casscade.verify")


@dataclass
class VerifyOptions:
    """How a table is read and judged (the command's flags)."""

    consistency: str = "ALL"
    rate: float = 0.0  # table rows a second at most (0: no limit)
    ranges: list[tuple[int, int]] = field(default_factory=list)  # the token ranges read
    sampled: bool = False  # `ranges` are a sample: stream keys outside them are skipped
    grace_s: float = 10.0
    rechecks: int = 3
    keep: int = 10  # differences kept with both sides


@dataclass
class TableResult:
    """What verifying one table found."""

    table: str
    topic: str
    report: Report
    rows: int = 0
    events: int = 0
    position_us: int = 0
    rechecks: int = 0
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)


def stream_of(kafka: Mapping[str, str], prefix: str, published: TableSchema,
              decoder: EventDecoder, modes: ValueModes, options: VerifyOptions) -> StreamImages:
    """The table's event topic, keeping only the keys of a sample's token ranges."""

    def in_sample(key: dict[str, Any]) -> bool:
        token = json_token(published, key, modes)
        return token is None or any(s < token <= e for s, e in options.ranges)

    return StreamImages(kafka, event_topic(prefix, published.keyspace, published.table), decoder,
                        in_sample if options.sampled else _always)


def verify_table(stream: StreamImages, rows: TableRows, published: TableSchema,
                 modes: ValueModes, options: VerifyOptions,
                 progress: Callable[[str], None] = lambda _line: None) -> TableResult:
    """Verify one table (`published`: its schema as captured) on `stream`, its events, and
    `rows`, its rows."""
    started = time.monotonic()
    name = f"{published.keyspace}.{published.table}"
    result = TableResult(name, stream.topic, Report(options.keep))
    # no topic at all: nothing can be in flight in it, so a row is missing, not pending
    exists = _catch_up(stream, name, progress)
    columns = [c.name for c in published.columns]
    unseen = set(stream.images)
    later: dict[str, tuple[TableRow | None, int | None]] = {}  # key → (row, token)
    scan = ScanProgress(len(options.ranges))

    def scanned(p: ScanProgress) -> None:
        progress(f"{name}: table {p.rows:,} rows, token ranges {p.ranges_done}/{p.ranges_total}")

    for text, _key, row, token in rows.scan(options.ranges, scan, scanned):
        unseen.discard(text)
        image = _view(stream.images.get(text), columns)
        if verdict(row, image, _position(stream, exists)) == EQUAL:
            result.report.add(text, EQUAL, None, None)
        else:
            later[text] = (row, token)
    result.rows = scan.rows
    unplaced = 0
    for text in unseen:
        deleted = stream.images[text] is None
        # a deleted key needs its token only to know whether a sample holds it
        token = (json_token(published, json.loads(text), modes)
                 if options.sampled or not deleted else None)
        if options.sampled and token is None:
            unplaced += 1  # in the sample or not: not known, so neither equal nor extra
        elif deleted:
            result.report.add(text, EQUAL, None, None)  # deleted on both sides
        else:
            later[text] = (None, token)
    if unplaced:
        result.notes.append(
            f"{unplaced:,} keys of the stream not found in the sampled ranges were not "
            "checked: their partition key's type gives no token, so whether they belong "
            "to the sample is not known (verify the table whole to check them)")

    for attempt in range(options.rechecks):
        if not later:
            break
        result.rechecks = attempt + 1
        progress(f"{name}: {len(later):,} keys not equal yet, checked again in "
                 f"{options.grace_s:g} s ({attempt + 1}/{options.rechecks})")
        time.sleep(options.grace_s)
        exists = _catch_up(stream, name, progress)
        later = _reread(rows, later, options.ranges)
        for text in [k for k, (row, _t) in later.items()
                     if verdict(row, _view(stream.images.get(k), columns),
                                _position(stream, exists)) == EQUAL]:
            del later[text]
            result.report.add(text, EQUAL, None, None)

    for text in sorted(later):
        row, _token = later[text]
        image = _view(stream.images.get(text), columns)
        result.report.add(text, verdict(row, image, _position(stream, exists)),
                          None if row is None else row.row, image)
    result.events, result.position_us = stream.events, stream.position_us
    if not exists:
        result.notes.append(f"event topic {stream.topic} does not exist: no event was "
                            "written")
    result.seconds = time.monotonic() - started
    if result.report.counts[PENDING]:
        result.notes.append("pending keys had writes newer than the stream's position at "
                            "the last recheck: still in flight, or the pipeline is behind")
    return result


def _always(_key: dict[str, Any]) -> bool:
    return True


def _position(stream: StreamImages, exists: bool) -> int:
    """The stream's position; past any write time when its topic does not exist."""
    return stream.position_us if exists else 2**63


def _catch_up(stream: StreamImages, name: str, progress: Callable[[str], None]) -> bool:
    """Read the stream on; False if its topic does not exist."""
    try:
        stream.catch_up(lambda n: progress(f"{name}: stream {n:,} events read"))
    except KafkaException as exc:
        if "not found" in str(exc):
            return False
        raise
    return True


def _view(image: dict[str, Any] | None, columns: list[str]) -> dict[str, Any] | None:
    """The image on the table's current columns (a column added since the key's last event
    is null there, as in a consumer's copy; a dropped one is gone from both)."""
    if image is None:
        return None
    return {c: image.get(c) for c in columns}


def _reread(rows: TableRows, keys: dict[str, tuple[TableRow | None, int | None]],
            ranges: list[tuple[int, int]]) -> dict[str, tuple[TableRow | None, int | None]]:
    """The rows of `keys` read again: only their partitions, by token, when every token is
    known; otherwise the whole of `ranges`."""
    tokens = {token for _row, token in keys.values()}
    if None in tokens:
        log.info("a key's token is not known from its JSON form: reading every range again")
        wanted = ranges
    else:
        wanted = [(t - 1, t) for t in sorted(tokens)]  # type: ignore[operator]
    fresh: dict[str, tuple[TableRow | None, int | None]] = {
        k: (None, token) for k, (_row, token) in keys.items()}
    for text, _key, row, token in rows.scan(wanted):
        if text in fresh:
            fresh[text] = (row, token)
    return fresh
