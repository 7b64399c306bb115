"""The paced token-range scan snapshot and verify share (a fake session: no services)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from cassandra import ConsistencyLevel

from shared import table_scan
from shared.schema import table_from_json
from shared.table_scan import Pacer, ScanProgress, TableScan, token_ranges

TABLE = table_from_json({"keyspace": "ks", "table": "t", "id": str(uuid.UUID(int=1)), "columns": [
    {"name": "k", "kind": "partition_key", "position": 0, "type": "int"},
    {"name": "v", "kind": "regular", "position": -1, "type": "text"}]}, {})


class Session:
    """Prepares anything; a range (start, end] holds `rows[start]`."""

    client_protocol_handler: Any = None

    def __init__(self, rows: dict[int, list[tuple]]) -> None:
        self.rows = rows
        self.read: list[tuple[int, int]] = []

    def prepare(self, sql: str) -> Any:
        return type("Prepared", (), {"sql": sql})()

    def execute(self, _statement: Any, bounds: tuple[int, int]) -> list[tuple]:
        self.read.append(bounds)
        return self.rows.get(bounds[0], [])


def test_the_statement_is_prepared_at_the_consistency_and_page_size_given() -> None:
    scan = TableScan(Session({}), TABLE, "local_quorum", 500)
    assert scan.statement.sql == ('SELECT "k", "v", WRITETIME("v"), TTL("v") FROM "ks"."t" '
                                  'WHERE token("k") > ? AND token("k") <= ?')
    assert scan.statement.fetch_size == 500
    assert scan.statement.consistency_level == ConsistencyLevel.LOCAL_QUORUM


def test_ranges_skip_what_is_done_and_count_a_range_when_the_next_is_asked_for() -> None:
    ring = token_ranges(4)
    session = Session({ring[1][0]: [(1, "a", 5, None)], ring[3][0]: [(2, "b", 6, None)] * 2})
    progress = ScanProgress(4, 1, resumed_with=1)
    seen = []
    for index, rows in TableScan(session, TABLE, "ALL", 10).ranges(ring, progress, Pacer(0),
                                                                   skip={0}):
        seen.append((index, list(rows), progress.ranges_done))
    assert seen == [(1, [(1, "a", 5, None)], 1), (2, [], 2), (3, [(2, "b", 6, None)] * 2, 3)]
    assert session.read == ring[1:]
    assert (progress.rows, progress.ranges_done) == (3, 4)


def test_the_pacer_holds_the_rows_to_the_rate_since_its_start(monkeypatch) -> None:
    now, slept = [100.0], []
    monkeypatch.setattr(table_scan.time, "monotonic", lambda: now[0])
    monkeypatch.setattr(table_scan.time, "sleep", slept.append)
    pacer = Pacer(4.0, started=99.0)  # a second ago: four rows are due already
    for _ in range(5):
        pacer.tick()
    assert slept == [pytest.approx(0.25)]
    Pacer(0).tick()  # no limit: never sleeps
    assert len(slept) == 1
