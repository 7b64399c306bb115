"""`_cdc.idx` parsing: offsets, COMPLETED, and files caught mid-rewrite."""

from __future__ import annotations

from pathlib import Path

import pytest

from publisher.agent.cdc_index import CdcIndex, index_path, parse_cdc_index, read_cdc_index


@pytest.mark.parametrize(("text", "expected"), [
    ("4096", CdcIndex(4096, False)),
    ("4096\n", CdcIndex(4096, False)),
    ("253528\nCOMPLETED", CdcIndex(253528, True)),
    ("253528\nCOMPLETED\n", CdcIndex(253528, True)),
    ("0", CdcIndex(0, False)),
    ("", None),            # truncated, not yet rewritten
    ("\n", None),
    ("12a", None),         # torn write
    ("-5", None),
    ("77\nCOMPLE", CdcIndex(77, False)),  # second line half written: not complete yet
])
def test_parse(text: str, expected: CdcIndex | None) -> None:
    assert parse_cdc_index(text) == expected


def test_index_path_names_the_idx_beside_the_segment() -> None:
    seg = Path("/cdc_raw/CommitLog-7-1795335678496.log")
    assert index_path(seg) == Path("/cdc_raw/CommitLog-7-1795335678496_cdc.idx")


def test_read_missing_and_present(tmp_path: Path) -> None:
    seg = tmp_path / "CommitLog-8-12.log"
    seg.write_bytes(b"")
    assert read_cdc_index(seg) is None
    index_path(seg).write_text("10\nCOMPLETED\n")
    assert read_cdc_index(seg) == CdcIndex(10, True)
