"""The hand-specialised RowUpdate readers, the pure-Python one and its compiled twin, return
exactly what fastavro returns, and fail alike on damage."""

from __future__ import annotations

import random

import pytest

from publisher.agent.record_writer import SourceInfo
from publisher.commitlog.reader import CommitLogReader
from publisher.commitlog.schema_source import FileSchemaSource
from shared import rowupdate, rowupdate_reader
from shared.rowupdate_reader import read_row_update

from support import rowupdate_reference
from support.paths import COMMITLOG_FIXTURES as FIXTURES
from support.splitter_reference import split


def _encoded(name: str) -> list[bytes]:
    reader = CommitLogReader(FileSchemaSource(FIXTURES / name / "schema.json"))
    segment = next((FIXTURES / name).glob("CommitLog-*.log"))
    info = SourceInfo("host-ü", "dc1", segment.name, 1, 7, 12)
    return [rowupdate.encode(rec) for m in reader.read(segment)
            for _, rec in split(m, info, lambda t: t.schema_hash)]


@pytest.fixture(params=["compiled", "python"], autouse=True)
def reader(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every test here runs with each reader."""
    if request.param == "compiled":
        assert rowupdate_reader.COMPILED, (
            "shared.rowupdate_creader is not built: setup.py builds it at install "
            "(`make venv`), which needs Cython and a C compiler")
    else:
        monkeypatch.setattr(rowupdate_reader, "_reader", rowupdate_reader._read)
    return request.param


@pytest.mark.parametrize("name", ["v7", "v8", "v7-zstd"])
def test_every_fixture_record_reads_like_fastavro(name: str) -> None:
    values = _encoded(name)
    assert len(values) > 100
    for v in values:
        assert read_row_update(v) == rowupdate_reference.decode(v)


def test_blocked_arrays_and_big_numbers_read_like_fastavro() -> None:
    rec = rowupdate_reference.decode(_encoded("v7")[0])
    rec["liveness"] = {"timestamp": -(2**63), "ttl": 2**31 - 1, "local_expiration_time": 2**40}
    rec["source"]["position"] = 2**62
    value = rowupdate_reference.encode_with_fastavro(rec)
    assert read_row_update(value) == rowupdate_reference.decode(value)


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
            assert got == rowupdate_reference.decode(damaged)
    with pytest.raises(rowupdate.RecordFormatError, match="format version"):
        read_row_update(b"\x05" + values[0][1:])


def test_the_readers_agree_on_random_bytes_and_on_long_varints() -> None:
    """Both readers on the same inputs: equal dicts or both a RecordFormatError, including
    varints of 10 and 11 bytes (up to and beyond 64 bits) where a number is read."""
    rnd = random.Random(11)
    base = _encoded("v7")[:50]
    cases: list[bytes] = []
    for v in base:
        for _ in range(20):  # splices of random bytes
            i = rnd.randrange(1, len(v))
            noise = bytes(rnd.randrange(256) for _ in range(rnd.randrange(12)))
            cases.append(v[:i] + noise + v[i + rnd.randrange(3):])
    rec = rowupdate_reference.decode(base[0])
    rec["source"].update(segment_id=0, position=0, index=0, commitlog_version=0,
                         messaging_version=0)
    zeros = rowupdate_reference.encode_with_fastavro(rec)  # last 5 bytes: the five numbers, 0 each
    assert zeros[-5:] == bytes(5)
    for big in (b"\xff" * 9 + b"\x01", b"\xfe" * 9 + b"\x01", b"\xff" * 9 + b"\x03",
                b"\x80" * 10 + b"\x00", b"\xff" * 10 + b"\x7f", b"\x81" + b"\x80" * 10):
        cases.append(zeros[:-5] + big + zeros[-4:])  # as segment_id
    outcomes = {}
    for name, read in [("compiled", rowupdate_reader._reader), ("python", rowupdate_reader._read)]:
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(rowupdate_reader, "_reader", read)
            outcomes[name] = [_outcome(v) for v in cases]
    assert outcomes["compiled"] == outcomes["python"]
    # the long varints were read as numbers, beyond 64 bits too (not refused)
    longs = [o if o == "error" else o["source"]["segment_id"] for o in outcomes["python"][-6:]]
    assert longs[0] == -(2**63) and longs[2] == -(2**64) and longs[3] == 0, longs
    assert sum(o == "error" for o in outcomes["python"]) < len(cases)  # not all refused


def _outcome(value: bytes) -> object:
    try:
        return read_row_update(value)
    except rowupdate.RecordFormatError:
        return "error"
