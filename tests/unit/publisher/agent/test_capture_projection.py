"""Decoded updates as captured, through the record writer: what an excluded or masked
column held is not in the raw bytes."""

from __future__ import annotations

import uuid

from publisher.agent.capture_projection import UpdateProjection
from publisher.agent.record_writer import RecordWriter, SourceInfo
from publisher.commitlog.model import Cell, Liveness, Mutation, PartitionUpdate, Row
from shared.capture import HASH, CaptureSettings
from shared.schema import table_from_json

from support import rowupdate_reference

PEOPLE = table_from_json({
    "keyspace": "crm", "table": "people", "id": str(uuid.UUID(int=5)), "cdc": True,
    "columns": [
        {"name": "id", "kind": "partition_key", "position": 0, "type": "int"},
        {"name": "email", "kind": "regular", "position": -1, "type": "text"},
        {"name": "notes", "kind": "regular", "position": -1, "type": "text"},
        {"name": "age", "kind": "regular", "position": -1, "type": "int"},
    ]}, {})
OTHER = table_from_json({
    "keyspace": "crm", "table": "audit", "id": str(uuid.UUID(int=6)), "cdc": True,
    "columns": [{"name": "id", "kind": "partition_key", "position": 0, "type": "int"},
                {"name": "what", "kind": "regular", "position": -1, "type": "text"}]}, {})
KEY = (7).to_bytes(4, "big")


def _cell(table, column: str, value: bytes, ts: int = 100) -> Cell:
    return Cell(table.column(column), None, value, ts, 0, None, False)


def _row(*cells: Cell, insert: bool = False) -> Row:
    return Row((), Liveness(100, 0, None) if insert else None, None, False, list(cells), {},
               False)


def _published(projection: UpdateProjection, *updates: PartitionUpdate) -> list[bytes]:
    mutation = Mutation("crm", KEY, [u for u in map(projection.project, updates)
                                     if u is not None], position=40)
    writer = RecordWriter(SourceInfo("node-1", "dc1", "CommitLog-7-1.log", 1, 7, 12),
                          lambda t: t.schema_hash)
    return [value for _update, value in writer.records(mutation)]


def test_excluded_and_masked_values_never_reach_the_raw_bytes() -> None:
    rules = CaptureSettings(table_exclude_list=["crm\\.audit"],
                            column_exclude_list=["crm\\.people\\.notes"],
                            column_mask_hash=["crm\\.people\\.email"],
                            column_mask_hash_salt="pepper").rules()
    projection = UpdateProjection(rules)
    insert = PartitionUpdate(PEOPLE, KEY, None, None, [_row(
        _cell(PEOPLE, "email", b"ada@example.com"), _cell(PEOPLE, "notes", b"secret-note"),
        _cell(PEOPLE, "age", (36).to_bytes(4, "big")), insert=True)], [])
    audit = PartitionUpdate(OTHER, KEY, None, None, [_row(_cell(OTHER, "what", b"audited"))],
                            [])
    (value,) = _published(projection, insert, audit)
    assert b"ada@example.com" not in value and b"secret-note" not in value
    assert b"audited" not in value
    record = rowupdate_reference.decode(value)
    published = projection.plan(PEOPLE).published
    assert record["schema_hash"] == published.schema_hash != PEOPLE.schema_hash
    assert {c["column"]: c["value"] for c in record["cells"]} == {
        "email": rules.mask(HASH, b"ada@example.com"), "age": (36).to_bytes(4, "big")}
    assert [c.name for c in published.columns] == ["id", "email", "age"]


def test_an_update_of_excluded_columns_only_publishes_nothing() -> None:
    rules = CaptureSettings(column_exclude_list=["crm\\.people\\.notes"]).rules()
    projection = UpdateProjection(rules)
    notes_only = PartitionUpdate(PEOPLE, KEY, None, None,
                                 [_row(_cell(PEOPLE, "notes", b"x"))], [])
    assert projection.project(notes_only) is None
    assert _published(projection, notes_only) == []
    # an INSERT that writes only the excluded column still makes the row exist: kept
    inserted = PartitionUpdate(PEOPLE, KEY, None, None,
                               [_row(_cell(PEOPLE, "notes", b"x"), insert=True)], [])
    (value,) = _published(projection, inserted)
    assert rowupdate_reference.decode(value)["cells"] == []
    # a table without rules goes through untouched
    untouched = PartitionUpdate(OTHER, KEY, None, None, [_row(_cell(OTHER, "what", b"w"))],
                                [])
    assert projection.project(untouched) is untouched
