"""1,000 random corruptions of the real fixture segments: never a crash, hang or silent change.

Each case damages one copy (bit flips, a overwritten run, a truncation, or garbage appended)
and decodes it. Required: only typed CommitLogErrors escape; every mutation that lies wholly
before the damage is decoded exactly as from the clean file; and when no error is raised the
result is the clean result (so damage is never passed on silently).
"""

from __future__ import annotations

import random
import resource
import signal
import struct
from pathlib import Path

import pytest

from publisher.commitlog.errors import CommitLogError
from publisher.commitlog.reader import CommitLogReader
from publisher.commitlog.schema_source import FileSchemaSource

from support.paths import COMMITLOG_FIXTURES as FIXTURES

CASES = 1000
SEED = 20261122


def _sections(data: bytes, compressed: bool) -> list[tuple[int, int, int]]:
    """(file end, logical start, logical end) of each section of a clean segment."""
    (plen,) = struct.unpack_from(">H", data, 12)
    offset = logical = 18 + plen
    out = []
    while offset + 8 <= len(data):
        nxt = struct.unpack_from(">i", data, offset)[0]
        if nxt == 0:
            break
        if compressed:
            (size,) = struct.unpack_from(">i", data, offset + 8)
            out.append((nxt, logical, logical + 8 + size))
            logical += 8 + size
        else:
            out.append((nxt, offset, nxt))
        offset = nxt
    return out


def _decode(reader: CommitLogReader, path: Path) -> tuple[list[tuple], CommitLogError | None]:
    got = []
    try:
        for m in reader.read(path):
            got.append((m.start, m.position, [(u.table.id, u.partition_key, len(u.rows))
                                              for u in m.updates]))
    except CommitLogError as exc:
        return got, exc
    return got, None


def _damage(rng: random.Random, data: bytes) -> tuple[bytes, int, str]:
    kind = rng.choice(["flip", "flip", "overwrite", "truncate", "append"])
    if kind == "flip":
        out = bytearray(data)
        first = rng.randrange(len(data))
        for _ in range(rng.randint(1, 8)):
            i = min(len(data) - 1, first + rng.randrange(64))
            out[i] ^= 1 << rng.randrange(8)
        return bytes(out), first, kind
    if kind == "overwrite":
        start = rng.randrange(len(data))
        length = rng.randint(1, 256)
        junk = bytes(rng.randrange(256) for _ in range(length))
        return data[:start] + junk + data[start + length:], start, kind
    if kind == "truncate":
        cut = rng.randrange(len(data))
        return data[:cut], cut, kind
    junk = bytes(rng.randrange(256) for _ in range(rng.randint(1, 4096)))
    return data + junk, len(data), kind


class _Timeout(Exception):
    pass


def _alarm(_sig, _frame):
    raise _Timeout


@pytest.mark.parametrize("name", sorted(p.parent.name for p in FIXTURES.glob("*/manifest.json")))
def test_random_corruptions(name: str, tmp_path: Path) -> None:
    schema = FileSchemaSource(FIXTURES / name / "schema.json")
    segment = next((FIXTURES / name).glob("CommitLog-*.log"))
    data = segment.read_bytes()
    clean, error = _decode(CommitLogReader(schema), segment)
    assert error is None and clean
    compressed = b"compressionClass" in data[:200]
    sections = _sections(data, compressed)
    fixtures = len(list(FIXTURES.glob("*/manifest.json")))
    rng = random.Random(f"{SEED}-{name}")
    target = tmp_path / segment.name
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    old = signal.signal(signal.SIGALRM, _alarm)
    try:
        for case in range(CASES // fixtures + 1):
            damaged, where, kind = _damage(rng, data)
            target.write_bytes(damaged)
            signal.alarm(10)
            try:
                got, err = _decode(CommitLogReader(schema), target)
            except _Timeout:
                pytest.fail(f"case {case} ({kind} at {where}) hung")
            except Exception as exc:  # noqa: BLE001 — the point: nothing untyped escapes
                pytest.fail(f"case {case} ({kind} at {where}): untyped {exc!r}")
            finally:
                signal.alarm(0)
            if err is None:
                assert got == clean, f"case {case} ({kind} at {where}) changed data silently"
                continue
            assert err.path == str(target) and err.offset >= 0 and err.reason
            # Every mutation of a section that ends (in the file) before the damage survives.
            safe_end = max((lend for fend, _, lend in sections if fend <= where), default=0)
            before = [m for m in clean if m[1] <= safe_end]
            assert got[:len(before)] == before, f"case {case} ({kind} at {where}) lost data"
    finally:
        signal.signal(signal.SIGALRM, old)
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss_before) / 1024
    assert grown_mb < 100, f"peak RSS grew {grown_mb:.0f} MB while fuzzing"
