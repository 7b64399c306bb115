"""Decoding the real fixture segments reproduces what Cassandra itself reports.

For every fixture (v7, v8, compressed): every mutation decodes with the node's full schema
(zero unknown tables), every write statement's client timestamp appears in the decoded
cells, and folding the decoded updates gives exactly the manifest's SELECT results: every
value, WRITETIME and TTL of every row of every workload table.
"""

from __future__ import annotations

import json

import pytest

from publisher.commitlog.reader import CommitLogReader
from publisher.commitlog.schema_source import FileSchemaSource

from support.paths import COMMITLOG_FIXTURES as FIXTURES
from support.reference import ReferenceTable, diff_rows

NAMES = sorted(p.parent.name for p in FIXTURES.glob("*/manifest.json"))


def _decode(name: str):
    manifest = json.loads((FIXTURES / name / "manifest.json").read_text())
    reader = CommitLogReader(FileSchemaSource(FIXTURES / name / "schema.json"))
    mutations = []
    for seg in manifest["segments"]:
        mutations.extend(reader.read(FIXTURES / name / seg["file"]))
    return manifest, reader, mutations


@pytest.mark.parametrize("name", NAMES)
def test_every_mutation_decodes_with_no_unknowns(name: str) -> None:
    manifest, reader, mutations = _decode(name)
    assert not reader.skipped
    assert mutations
    assert mutations[-1].position == manifest["segments"][-1]["idx_offset"]
    assert [m.position for m in mutations] == sorted(m.position for m in mutations)
    tables = {u.table.table for m in mutations for u in m.updates if u.table.keyspace == "fx"}
    assert tables == set(manifest["contents"])  # every workload table, no_cdc included


@pytest.mark.parametrize("name", NAMES)
def test_client_timestamps_reach_the_commit_log(name: str) -> None:
    manifest, _, mutations = _decode(name)
    seen = set()
    for m in mutations:
        for u in m.updates:
            if u.table.keyspace != "fx":
                continue
            for row in [*u.rows, *([u.static_row] if u.static_row else [])]:
                seen.update(c.timestamp for c in row.cells)
                if row.liveness:
                    seen.add(row.liveness.timestamp)
                if row.deletion:
                    seen.add(row.deletion.marked_for_delete_at)
                seen.update(d.marked_for_delete_at for d in row.complex_deletions.values())
            if u.partition_deletion:
                seen.add(u.partition_deletion.marked_for_delete_at)
            seen.update(mk.start_deletion.marked_for_delete_at for mk in u.markers
                        if mk.start_deletion)
    writes = [s for s in manifest["statements"] if s["kind"] == "write"]
    missing = []
    for s in writes:
        explicit = [int(w) for w in s["cql"].replace(",", " ").split()
                    if w.isdigit() and len(w) == 16]
        expected = explicit[0] if "USING TIMESTAMP" in s["cql"] else s["client_timestamp_us"]
        # Counter cells and LWT commits carry server-side timestamps, not the client's.
        if "counter" in s["label"] or "lwt" in s["label"]:
            continue
        if expected not in seen:
            missing.append((s["label"], expected))
    assert not missing


@pytest.mark.parametrize("name", NAMES)
def test_folded_updates_equal_cassandras_select(name: str) -> None:
    manifest, _, mutations = _decode(name)
    by_table: dict[str, ReferenceTable] = {}
    schemas = {}
    for m in mutations:
        for u in m.updates:
            if u.table.keyspace == "fx":
                schemas[u.table.table] = u.table
                by_table.setdefault(u.table.table, ReferenceTable(u.table)).apply(u)
    now_s = manifest["contents_queried_at_ms"] // 1000
    problems = []
    for table, expected in manifest["contents"].items():
        problems += diff_rows(schemas[table], by_table[table].rows(now_s), expected)
    assert not problems, "\n".join(problems[:10])


def test_comparison_catches_a_wrong_value_or_timestamp() -> None:
    manifest, _, mutations = _decode("v7")
    table = next(u.table for m in mutations for u in m.updates if u.table.table == "ttls")
    ref = ReferenceTable(table)
    for m in mutations:
        for u in m.updates:
            if u.table.table == "ttls":
                ref.apply(u)
    rows = ref.rows(manifest["contents_queried_at_ms"] // 1000)
    expected = manifest["contents"]["ttls"]
    assert diff_rows(table, rows, expected) == []
    rows[0]["values"]["a"] = "changed"
    assert diff_rows(table, rows, expected)
    rows[0]["values"]["a"] = expected[0]["values"]["a"]
    rows[1]["writetime"]["b"] = 1
    assert diff_rows(table, rows, expected)
    assert diff_rows(table, rows[1:], expected)
