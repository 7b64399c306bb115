"""Reading a stopped query's checkpoint logs (materializer.checkpoint.records), and the offsets
`materializer reshard` takes from them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from materializer.checkpoint.files import LocalFiles
from materializer.checkpoint.records import (
    CheckpointLogError,
    last_batch,
    parse_offset_log,
)
from materializer.reshard import ReshardRefused, committed_offsets

META = {"batchWatermarkMs": 0, "batchTimestampMs": 1795439820204,
        "conf": {"spark.sql.shuffle.partitions": "2"}}


def _offsets(batch_end: dict) -> str:
    return "v1\n" + json.dumps(META) + "\n" + json.dumps(batch_end)


def _checkpoint(root: Path, committed: int, planned: int) -> Path:
    """A checkpoint as Spark leaves it: offsets/0..planned, commits/0..committed."""
    (root / "offsets").mkdir(parents=True)
    (root / "commits").mkdir()
    for b in range(planned + 1):
        (root / "offsets" / str(b)).write_text(_offsets({"p.raw.ks.t": {"0": 10 * b + 5,
                                                                        "1": b}}))
        (root / "offsets" / f".{b}.crc").write_text("x")
    for b in range(committed + 1):
        (root / "commits" / str(b)).write_text('v1\n{"nextBatchWatermarkMs":0}')
    return root


def test_the_offset_log_gives_conf_and_the_source_offset() -> None:
    conf, sources = parse_offset_log(_offsets({"t": {"0": 3}}))
    assert conf["spark.sql.shuffle.partitions"] == "2"
    assert sources == [{"t": {"0": 3}}]
    assert parse_offset_log("v1\n{}\n-")[1] == [None]
    with pytest.raises(CheckpointLogError):
        parse_offset_log("not an offset log")


def test_the_last_committed_batch_is_found(tmp_path: Path) -> None:
    assert last_batch(LocalFiles(_checkpoint(tmp_path / "c", committed=3, planned=3)
                                 ).names("commits")) == 3
    assert last_batch(LocalFiles(tmp_path / "nowhere").names("commits")) is None
    # a log's directory as a Hadoop file system lists it: checksum files beside the entries
    assert last_batch(["0", ".0.crc", "9", "10", ".10.crc", "_tmp"]) == 10
    assert last_batch([".0.crc"]) is None


def test_reshard_takes_the_committed_offsets_and_refuses_a_planned_batch(tmp_path: Path) -> None:
    """A job stopped at its end has committed what it planned: its offsets are read. A job
    killed mid-batch left offsets/N without commits/N: refused (run it to its end first)."""
    done = committed_offsets(LocalFiles(_checkpoint(tmp_path / "done", committed=2, planned=2)))
    assert done == {"p.raw.ks.t": {0: 25, 1: 2}}
    with pytest.raises(ReshardRefused, match="micro-batch 4 is planned but not committed"):
        committed_offsets(LocalFiles(_checkpoint(tmp_path / "cut", committed=3, planned=4)))
    with pytest.raises(ReshardRefused, match="no committed micro-batch"):
        committed_offsets(LocalFiles(tmp_path / "nowhere"))
