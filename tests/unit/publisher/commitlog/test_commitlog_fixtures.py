"""The committed commit log fixtures are intact and say what their manifests claim.

Decoding them is issue 3's job; this checks the files themselves: checksums, descriptor
headers (version, id, parameters, CRC) and that the manifest matches workload.py.
"""

from __future__ import annotations

import hashlib
import json
import struct
import sys
import zlib

import pytest

from support.paths import COMMITLOG_FIXTURES as FIXTURES

sys.path.insert(0, str(FIXTURES))
from workload import SCHEMA, TABLES, WRITES

EXPECTED = {
    "v7": (7, None), "v8": (8, None), "v7-lz4": (7, "LZ4Compressor"),
    "v7-snappy": (7, "SnappyCompressor"), "v7-deflate": (7, "DeflateCompressor"),
    "v7-zstd": (7, "ZstdCompressor"),
}


def _manifest(name: str) -> dict:
    return json.loads((FIXTURES / name / "manifest.json").read_text())


def test_every_fixture_set_is_present() -> None:
    present = {p.parent.name for p in FIXTURES.glob("*/manifest.json")}
    assert present == set(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_segments_match_manifest_and_headers(name: str) -> None:
    version, compressor = EXPECTED[name]
    manifest = _manifest(name)
    assert manifest["commitlog_compression"] == compressor
    assert manifest["storage_compatibility_mode"] == ("NONE" if version == 8 else "CASSANDRA_4")
    assert manifest["segments"], "no segment captured"
    for seg in manifest["segments"]:
        data = (FIXTURES / name / seg["file"]).read_bytes()
        assert len(data) == seg["bytes"]
        assert hashlib.sha256(data).hexdigest() == seg["sha256"]
        assert seg["file"] == f"CommitLog-{version}-{seg['segment_id']}.log"
        if compressor is None:
            assert seg["bytes"] == seg["idx_offset"]  # plain: truncated at the synced offset
        idx = (FIXTURES / name / seg["file"].replace(".log", "_cdc.idx")).read_text()
        assert int(idx.split("\n")[0]) == seg["idx_offset"]

        hdr_version, seg_id, plen = struct.unpack(">iqH", data[:14])
        assert (hdr_version, seg_id) == (version, seg["segment_id"])
        params = json.loads(data[14:14 + plen])
        if compressor:
            assert params["compressionClass"].endswith(compressor)
        else:
            assert params == {}
        crc = zlib.crc32(struct.pack(">iIIi", hdr_version, seg_id & 0xFFFFFFFF, seg_id >> 32,
                                     plen) + data[14:14 + plen])
        assert struct.unpack(">I", data[14 + plen:18 + plen])[0] == crc


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_manifest_records_the_workload(name: str) -> None:
    manifest = _manifest(name)
    labels = [s["label"] for s in manifest["statements"]]
    assert labels == [label for label, _ in SCHEMA] + [label for label, _ in WRITES]
    writes = [s for s in manifest["statements"] if s["kind"] == "write"]
    stamps = [s["client_timestamp_us"] for s in writes]
    assert stamps == sorted(stamps) and len(set(stamps)) == len(stamps)
    assert all(s.get("lwt_applied", True) for s in writes)
    assert set(manifest["contents"]) == set(TABLES)
    tables = manifest["tables"]
    assert all(tables[t]["cdc"] for t in TABLES if t != "no_cdc")
    assert not tables["no_cdc"]["cdc"]
    assert [d["name"] for d in tables["evolving"]["dropped_columns"]] == ["extra"]
    # A few facts the workload guarantees, so a broken generator cannot pass unnoticed.
    ttls = {r["values"]["k"]: r for r in manifest["contents"]["ttls"]}
    assert ttls[10]["values"]["a"] == "ts+ttl"
    assert ttls[10]["writetime"]["b"] == 2_000_000_000_000_000
    counters = {r["values"]["k"]: r["values"] for r in manifest["contents"]["counters"]}
    assert counters["a"]["hits"] == 8 and counters["a"]["misses"] == -3
    assert "b" not in counters
