"""verify's judgement of each key: equal, pending, missing, extra or different."""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import Any

from casscade.verify.compare import (
    DIFFERENT,
    EQUAL,
    EXTRA,
    MISSING,
    PENDING,
    Report,
    TableRow,
    verdict,
)

POSITION = 1_000_000  # the newest write time (µs) the stream has reached


def compare(table: Mapping[Hashable, TableRow], stream: Mapping[Hashable, dict[str, Any] | None],
            position_us: int, keep: int = 10) -> Report:
    """Every key of either side judged into one report (the verifier's verdicts, no rechecks)."""
    report = Report(keep)
    for key in sorted(table.keys() | stream.keys(), key=repr):
        row = table.get(key)
        image = stream.get(key)
        report.add(key, verdict(row, image, position_us), row.row if row else None, image)
    return report


def test_each_verdict() -> None:
    row = {"id": 1, "v": "a"}
    assert verdict(TableRow(row, 900_000), dict(row), POSITION) == EQUAL
    assert verdict(None, None, POSITION) == EQUAL  # deleted in both
    assert verdict(TableRow(row, 1_200_000), {"id": 1, "v": "old"}, POSITION) == PENDING
    assert verdict(TableRow(row, 1_200_000), None, POSITION) == PENDING  # not streamed yet
    assert verdict(TableRow(row, 900_000), None, POSITION) == MISSING  # a dropped event
    assert verdict(None, row, POSITION) == EXTRA  # a delete the stream lacks
    assert verdict(TableRow(row, 900_000), {"id": 1, "v": "b"}, POSITION) == DIFFERENT


def test_a_report_counts_every_key_and_keeps_the_first_differences() -> None:
    table = {k: TableRow({"id": k, "v": str(k)}, 500_000) for k in range(20)}
    stream = {k: {"id": k, "v": str(k)} for k in range(20)}
    del stream[3]  # a dropped event
    stream[4] = {"id": 4, "v": "stale"}  # a duplicated stale event came last
    stream[99] = {"id": 99, "v": "ghost"}  # a row Cassandra does not have
    table[5] = TableRow({"id": 5, "v": "new"}, 2_000_000)  # written after the position
    report = compare(table, stream, POSITION, keep=2)
    assert dict(report.counts) == {EQUAL: 17, MISSING: 1, DIFFERENT: 1, PENDING: 1, EXTRA: 1}
    assert report.mismatched == 3 and report.pending == [5]
    assert [(d.key, d.verdict) for d in report.differences] == [(3, MISSING), (4, DIFFERENT)]
    assert report.differences[1].table == {"id": 4, "v": "4"}
    assert report.differences[1].stream == {"id": 4, "v": "stale"}
