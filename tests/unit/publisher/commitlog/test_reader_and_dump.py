"""Schema refresh on unknown tables, --skip-unknown, and `casscade publisher dump` output."""

from __future__ import annotations

import json
import uuid
from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner

from casscade.cli import cli
from publisher.commitlog.errors import UnknownColumnError, UnknownTableError
from publisher.commitlog.reader import CommitLogReader
from shared.schema import TableSchema, catalog_from_json

from support.paths import COMMITLOG_FIXTURES

FIXTURE = COMMITLOG_FIXTURES / "v7"
SEGMENT = next(FIXTURE.glob("CommitLog-*.log"))


class _Source:
    """A schema source that learns the fx tables only at its n-th refresh."""

    def __init__(self, know_fx_after: int | None) -> None:
        doc = json.loads((FIXTURE / "schema.json").read_text())
        self.all = catalog_from_json(doc)
        self.know_fx_after = know_fx_after
        self.refreshes = 0

    def table(self, table_id: uuid.UUID) -> TableSchema | None:
        t = self.all.get(table_id)
        known = self.know_fx_after is not None and self.refreshes >= self.know_fx_after
        return t if t is not None and (t.keyspace != "fx" or known) else None

    def refresh(self) -> bool:
        self.refreshes += 1
        return True


def test_unknown_table_triggers_one_refresh_then_decodes() -> None:
    source = _Source(know_fx_after=1)
    mutations = list(CommitLogReader(source).read(SEGMENT))
    assert source.refreshes == 1
    assert any(m.keyspace == "fx" for m in mutations)


def test_a_run_of_schema_changes_costs_one_refresh_before_the_next_user_mutation() -> None:
    # the fixture creates its keyspace and tables one statement at a time: each change's
    # system_schema mutations, then system.local's schema version and other system writes
    source = _Source(know_fx_after=0)
    reader = CommitLogReader(source)
    keyspaces: list[str] = []
    refreshes_at_first_fx = None
    for mutation in reader.read(SEGMENT):
        if mutation.keyspace == "fx" and refreshes_at_first_fx is None:
            refreshes_at_first_fx = source.refreshes
        keyspaces.append(mutation.keyspace)
        if mutation.keyspace == "system_schema":
            reader.schema_changed()
    first_fx = keyspaces.index("fx")
    assert keyspaces[:first_fx].count("system_schema") > 10  # many changes before it
    assert set(keyspaces[:first_fx]) - {"system", "system_schema"} == set()
    assert refreshes_at_first_fx == 1  # not one per change (it was 19)


def test_still_unknown_after_refresh_is_a_typed_error() -> None:
    source = _Source(know_fx_after=None)
    reader = CommitLogReader(source)
    decoded = []
    with pytest.raises(UnknownTableError) as err:
        decoded.extend(reader.read(SEGMENT))
    assert err.value.path == str(SEGMENT) and err.value.offset > 0
    assert uuid.UUID(err.value.table_id)
    assert source.refreshes == 1


def test_skip_unknown_counts_and_goes_on() -> None:
    reader = CommitLogReader(_Source(know_fx_after=None), skip_unknown=True)
    mutations = list(reader.read(SEGMENT))
    assert mutations and all(m.keyspace != "fx" for m in mutations)
    manifest = json.loads((FIXTURE / "manifest.json").read_text())
    fx_ids = {t["id"] for t in manifest["tables"].values()}
    assert set(reader.skipped) <= fx_ids and sum(reader.skipped.values()) > 50


def test_resume_and_until_offsets() -> None:
    source = _Source(know_fx_after=0)
    everything = list(CommitLogReader(source).read(SEGMENT))
    middle = everything[len(everything) // 2].position
    tail = list(CommitLogReader(source).read(SEGMENT, resume_from=middle))
    assert [m.position for m in tail] == [m.position for m in everything if m.position > middle]
    head = list(CommitLogReader(source).read(SEGMENT, until=middle))
    assert head and all(m.position <= middle for m in head)


def test_dump_prints_json_lines(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["publisher", "dump", str(SEGMENT), "--schema",
                                      str(FIXTURE / "schema.json")])
    assert result.exit_code == 0, result.output
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    manifest = json.loads((FIXTURE / "manifest.json").read_text())
    assert lines[-1]["position"] == manifest["segments"][0]["idx_offset"]
    inserts = [u for line in lines for u in line["updates"] if u["table"] == "all_types"]
    first = inserts[0]
    assert first["partition_key"] == {"pk_text": "p1", "pk_int": 1}
    cells = {c["column"]: c for c in first["rows"][0]["cells"]}
    assert cells["c_vector"]["value"] == [1.0, -2.5, 3.25]
    assert cells["c_udt"]["path"] in ("street", "number", "zip")
    assert f"{len(lines)} mutations" in result.stderr


def test_dump_unknown_table_fails_with_file_and_offset(tmp_path: Path) -> None:
    doc = json.loads((FIXTURE / "schema.json").read_text())
    doc["tables"] = [t for t in doc["tables"] if t["keyspace"] != "fx"]
    partial = tmp_path / "partial.json"
    partial.write_text(json.dumps(doc))
    runner = CliRunner()
    failed = runner.invoke(cli, ["publisher", "dump", str(SEGMENT), "--schema", str(partial)])
    assert failed.exit_code == 1
    assert "unknown_table" in failed.stderr and f"{SEGMENT} at offset" in failed.stderr
    skipped = runner.invoke(cli, ["publisher", "dump", str(SEGMENT), "--schema", str(partial),
                                  "--skip-unknown"])
    assert skipped.exit_code == 0
    assert "skipped" in skipped.stderr and "unknown table(s)" in skipped.stderr


def test_dump_needs_exactly_one_schema_source() -> None:
    result = CliRunner().invoke(cli, ["publisher", "dump", str(SEGMENT)])
    assert result.exit_code == 2 and "exactly one of --schema" in result.output


class _Incomplete(_Source):
    """Knows every table, but until its first refresh each fx table lacks its regular
    columns: a schema read while a new table's columns were still reaching the node (seen
    on the test ring: the agent then stopped on the segment until it restarted)."""

    def table(self, table_id: uuid.UUID) -> TableSchema | None:
        t = self.all.get(table_id)
        if t is None or t.keyspace != "fx" or self.refreshes > 0:
            return t
        return replace(t, columns=tuple(c for c in t.columns if c.kind != "regular"))


def test_an_unknown_column_triggers_one_refresh_then_decodes() -> None:
    source = _Incomplete(know_fx_after=0)
    mutations = list(CommitLogReader(source).read(SEGMENT))
    assert source.refreshes == 1
    assert any(m.keyspace == "fx" for m in mutations)


def test_still_unknown_column_after_refresh_is_a_typed_error() -> None:
    class Never(_Incomplete):
        def refresh(self) -> bool:
            return False  # Cassandra does not answer: the cached (incomplete) schema stays

    with pytest.raises(UnknownColumnError, match="has no column"):
        list(CommitLogReader(Never(know_fx_after=0)).read(SEGMENT))
