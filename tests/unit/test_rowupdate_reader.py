"""The hand-specialised RowUpdate reader returns exactly what fastavro returns."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from publisher.agent.splitter import SourceInfo, split
from publisher.commitlog.reader import CommitLogReader
from publisher.commitlog.schema_source import FileSchemaSource
from shared import rowupdate
from shared.rowupdate_reader import read_row_update

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "commitlog"


def _encoded(name: str) -> list[bytes]:
    reader = CommitLogReader(FileSchemaSource(FIXTURES / name / "schema.json"))
    segment = next((FIXTURES / name).glob("CommitLog-*.log"))
    info = SourceInfo("host-ü", "dc1", segment.name, 1, 7, 12)
    return [rowupdate.encode(rec) for m in reader.read(segment)
            for _, rec in split(m, info, lambda t: t.schema_hash)]


@pytest.mark.parametrize("name", ["v7", "v8", "v7-zstd"])
def test_every_fixture_record_reads_like_fastavro(name: str) -> None:
    values = _encoded(name)
    assert len(values) > 100
    for v in values:
        assert read_row_update(v) == rowupdate.decode(v)


def test_blocked_arrays_and_big_numbers_read_like_fastavro() -> None:
    rec = rowupdate.decode(_encoded("v7")[0])
    rec["liveness"] = {"timestamp": -(2**63), "ttl": 2**31 - 1, "local_expiration_time": 2**40}
    rec["source"]["position"] = 2**62
    value = rowupdate.encode_with_fastavro(rec)
    assert read_row_update(value) == rowupdate.decode(value)


def test_damage_gives_a_record_format_error_never_a_wrong_record() -> None:
    rnd = random.Random(7)
    values = _encoded("v7")[:300]
    for v in values:
        for _ in range(5):
            damaged = bytearray(v)
            if rnd.random() < 0.5:
                damaged = damaged[:rnd.randrange(1, len(v))]
            else:
                i = rnd.randrange(1, len(v))
                damaged[i] ^= 1 << rnd.randrange(8)
            damaged = bytes(damaged)
            try:
                got = read_row_update(damaged)
            except rowupdate.RecordFormatError:
                continue
            # a flip inside a value can still be a valid record: then fastavro agrees
            assert got == rowupdate.decode(damaged)
    with pytest.raises(rowupdate.RecordFormatError, match="format version"):
        read_row_update(b"\x05" + values[0][1:])
