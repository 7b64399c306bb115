"""Retiring a published segment: deleted, or moved to the archive, and never left in
cdc_raw (where the agent would find it again and publish it again)."""

from __future__ import annotations

import os
from pathlib import Path

from publisher.agent.cdc_dir import list_segments, retire

NAME = "CommitLog-7-1795743892879.log"


def _segment(cdc_raw: Path, body: bytes = b"segment") -> Path:
    cdc_raw.mkdir(exist_ok=True)
    path = cdc_raw / NAME
    path.write_bytes(body)
    path.with_name(NAME.replace(".log", "_cdc.idx")).write_text("4096\nCOMPLETED\n")
    return path


def test_a_replayed_segment_already_in_the_archive_leaves_cdc_raw(tmp_path: Path) -> None:
    # a node that restarts links a segment it had handed over already into cdc_raw again:
    # the archive then holds the same file under the same name (rename() would do nothing)
    cdc_raw, archive = tmp_path / "cdc_raw", tmp_path / "archive"
    path = _segment(cdc_raw)
    archive.mkdir()
    os.link(path, archive / NAME)
    retire(list_segments(cdc_raw)[0], archive)
    assert list_segments(cdc_raw) == [] and not list(cdc_raw.iterdir())
    assert (archive / NAME).read_bytes() == b"segment"
    assert sorted(p.name for p in archive.iterdir()) == [NAME, NAME.replace(".log", "_cdc.idx")]


def test_another_file_of_the_same_name_in_the_archive_is_kept(tmp_path: Path) -> None:
    cdc_raw, archive = tmp_path / "cdc_raw", tmp_path / "archive"
    archive.mkdir()
    (archive / NAME).write_bytes(b"older")
    _segment(cdc_raw, b"newer")
    retire(list_segments(cdc_raw)[0], archive)
    assert not list(cdc_raw.iterdir())
    assert (archive / NAME).read_bytes() == b"older"
    assert (archive / f"{NAME}.1").read_bytes() == b"newer"


def test_without_an_archive_a_segment_and_its_index_are_deleted(tmp_path: Path) -> None:
    cdc_raw = tmp_path / "cdc_raw"
    _segment(cdc_raw)
    retire(list_segments(cdc_raw)[0], None)
    assert not list(cdc_raw.iterdir())
