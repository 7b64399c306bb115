"""The pure parts of `casscade materializer rescale`: reading the old checkpoint's logs, the
new query's startingOffsets, and the refusals."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from materializer.rescale import (
    EARLIEST,
    OldCheckpoint,
    RescaleRefused,
    check_rescale,
    is_empty_checkpoint,
    last_commit,
    lost_partitions,
    parse_offset_log,
    read_old_checkpoint,
    starting_offsets,
)

META = {"batchWatermarkMs": 0, "batchTimestampMs": 1795439820204,
        "conf": {"spark.sql.shuffle.partitions": "2",
                 "spark.sql.streaming.stateStore.providerClass": "RocksDB"}}


def _offsets(batch_end: dict) -> str:
    return "v1\n" + json.dumps(META) + "\n" + json.dumps(batch_end)


def _checkpoint(root: Path, committed: int, planned: int, partitions: int = 2) -> Path:
    """A checkpoint as Spark leaves it: offsets/0..planned, commits/0..committed, state."""
    (root / "offsets").mkdir(parents=True)
    (root / "commits").mkdir()
    for b in range(planned + 1):
        (root / "offsets" / str(b)).write_text(_offsets({"p.raw.ks.t": {"0": 10 * b + 5,
                                                                        "1": b}}))
        (root / "offsets" / f".{b}.crc").write_text("x")
    for b in range(committed + 1):
        (root / "commits" / str(b)).write_text('v1\n{"nextBatchWatermarkMs":0}')
    for p in range(partitions):
        (root / "state" / "0" / str(p)).mkdir(parents=True)
    (root / "state" / "0" / "_metadata").mkdir()
    return root


def test_the_offset_log_gives_conf_and_the_source_offset() -> None:
    conf, sources = parse_offset_log(_offsets({"t": {"0": 3}}))
    assert conf["spark.sql.shuffle.partitions"] == "2"
    assert sources == [{"t": {"0": 3}}]
    assert parse_offset_log("v1\n{}\n-")[1] == [None]
    with pytest.raises(RescaleRefused):
        parse_offset_log("not an offset log")


def test_the_last_committed_batch_is_read_not_the_last_planned(tmp_path: Path) -> None:
    """A job killed mid-batch leaves offsets/N without commits/N: batch N is redone by
    whoever continues, so the new job starts where N-1 ended."""
    old = read_old_checkpoint(_checkpoint(tmp_path / "c", committed=3, planned=4))
    assert old.batch == 3
    assert old.offsets == {"p.raw.ks.t": {"0": 35, "1": 3}}
    assert old.partitions == 2
    assert last_commit(tmp_path / "nowhere") is None


def test_partitions_counted_from_the_state_when_the_conf_lacks_them(tmp_path: Path) -> None:
    root = _checkpoint(tmp_path / "c", 0, 0, partitions=3)
    text = (root / "offsets" / "0").read_text().replace('"spark.sql.shuffle.partitions": "2", ',
                                                        "")
    (root / "offsets" / "0").write_text(text)
    assert read_old_checkpoint(root).partitions == 3


def _broken(root: Path, how: str) -> None:
    """An old checkpoint broken in one way."""
    if how == "missing":
        return
    if how == "empty":
        root.mkdir()
        return
    _checkpoint(root, 1, 1)
    if how == "no offsets entry":
        (root / "offsets" / "1").unlink()
    elif how == "no state":
        shutil.rmtree(root / "state")
    elif how == "two sources":
        (root / "offsets" / "1").write_text("v1\n{}\n" + json.dumps({"a": {"0": 1}}) + "\n"
                                            + json.dumps({"b": {"0": 1}}))


@pytest.mark.parametrize(("how", "message"), [
    ("missing", "no such checkpoint"), ("empty", "no committed micro-batch"),
    ("no offsets entry", "offsets entry"), ("no state", "no state of operator 0"),
    ("two sources", "one Kafka source")])
def test_an_unusable_old_checkpoint_is_refused(tmp_path: Path, how: str, message: str) -> None:
    _broken(tmp_path / "old", how)
    with pytest.raises(RescaleRefused, match=message):
        read_old_checkpoint(tmp_path / "old")


def _old(tmp_path: Path, partitions: int = 2) -> OldCheckpoint:
    return OldCheckpoint(tmp_path / "old", 7, partitions, {})


def test_more_partitions_into_an_empty_checkpoint_pass(tmp_path: Path) -> None:
    (tmp_path / "old").mkdir()
    check_rescale(_old(tmp_path), tmp_path / "new", 4)  # does not exist yet
    (tmp_path / "empty").mkdir()
    check_rescale(_old(tmp_path), tmp_path / "empty", 2)  # as many: allowed (a move)


@pytest.mark.parametrize(("new", "partitions", "message"), [
    ("full", 4, "not empty"),
    ("old", 4, "another directory"),
    ("new", 1, "fewer than the old checkpoint's 2"),
])
def test_refusals(tmp_path: Path, new: str, partitions: int, message: str) -> None:
    (tmp_path / "old").mkdir()
    (tmp_path / "full" / "offsets").mkdir(parents=True)
    with pytest.raises(RescaleRefused, match=message):
        check_rescale(_old(tmp_path), tmp_path / new, partitions)


def test_empty_checkpoint(tmp_path: Path) -> None:
    assert is_empty_checkpoint(tmp_path / "x")
    assert is_empty_checkpoint(tmp_path)
    (tmp_path / "f").write_text("")
    assert not is_empty_checkpoint(tmp_path)


def test_starting_offsets_name_every_partition_kafka_has_now() -> None:
    """Spark insists on exactly the assigned partitions: a topic or partition created since
    the old job's last batch starts at the beginning (as Spark reads newly discovered ones),
    a deleted topic is left out."""
    committed = {"p.raw.ks.a": {"0": 12, "1": 7}, "p.raw.ks.gone": {"0": 4}}
    current = {"p.raw.ks.a": 3, "p.raw.ks.new": 2}
    start = starting_offsets(committed, current)
    assert start == {"p.raw.ks.a": {"0": 12, "1": 7, "2": EARLIEST},
                     "p.raw.ks.new": {"0": EARLIEST, "1": EARLIEST}}
    assert json.loads(json.dumps(start)) == start  # the option's JSON form as is
    assert lost_partitions(committed, current) == ["p.raw.ks.gone-0"]
    assert lost_partitions({"t": {"0": 1, "3": 2}}, {"t": 2}) == ["t-3"]


class _FakeState:
    """A MapState / ValueState / handle stand-in that records the calls."""

    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def getMapState(self, name: str, *_schemas: str) -> _FakeState:
        return _Named(self, name)

    def getValueState(self, name: str, *_schemas: str) -> _FakeState:
        return _Named(self, name)

    def registerTimer(self, at: int) -> None:
        self.calls.append(("timer", at))


class _Named:
    def __init__(self, log: _FakeState, name: str) -> None:
        self.log, self.name = log, name

    def updateValue(self, key: tuple, value: tuple) -> None:
        self.log.calls.append((self.name, key, value))

    def update(self, value: tuple) -> None:
        self.log.calls.append((self.name, value))


def test_initial_state_rows_are_written_as_the_old_job_kept_them() -> None:
    """handleInitialState: each kind of the old state back into its own state variable, the
    old registered timers registered again (stock state calls, no Spark)."""
    from pyspark.sql import Row

    from materializer.spark.processor import MaterializeProcessor, _Expiries, _Map

    handle = _FakeState()
    proc = MaterializeProcessor.__new__(MaterializeProcessor)
    proc.handle = handle
    proc.entries = _Map(handle, "partitions", "", "", False)
    proc.pages = _Map(handle, "pages", "", "", False)
    proc.expiries = _Expiries(handle, False)
    proc.timer = handle.getValueState("bucket_timer", "")

    def item(pk=None, page=None, blob=None, hash=None, at=None) -> dict:
        return {"pk": pk, "page": page, "blob": blob, "hash": hash, "at": at}

    rows = [("partitions", [item(b"k1", blob=b"s1", hash="h", at=5), item(b"k2", blob=b"s2",
                                                                          hash="h")]),
            ("pages", [item(b"k1", 3, b"p3")]),
            ("expiries", [item(blob=b"packed", at=5)]),
            ("bucket_timer", [item(at=9)]),
            ("timers", [item(at=5), item(at=9)])]
    for kind, items in rows:
        proc.handleInitialState(("p.raw.ks.t", 3), Row(topic="p.raw.ks.t", bucket=3,
                                                       kind=kind, items=items), None)
    assert handle.calls == [
        ("partitions", (b"k1",), (b"s1", "h", 5)), ("partitions", (b"k2",), (b"s2", "h", None)),
        ("pages", (b"k1", 3), (b"p3",)), ("expiries", (5,), (b"packed",)),
        ("bucket_timer", (9,)), ("timer", 5), ("timer", 9)]
    with pytest.raises(ValueError, match="unknown"):
        proc.handleInitialState(("t", 0), Row(topic="t", bucket=0, kind="other", items=[]),
                                None)
