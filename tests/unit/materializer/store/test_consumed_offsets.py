"""The record of the raw offsets a partition's committed batch consumed
(materializer.store.consumed_offsets), in a real RocksDB store: what tells a replay of a
committed batch (exactly-once) from a batch that runs for the first time."""

from __future__ import annotations

from pathlib import Path

import pytest

from materializer.store.consumed_offsets import (
    CHANGELOG_KEY,
    ConsumedOffsets,
    OffsetsDisagree,
    decode,
)
from materializer.store.partition_store import PartitionStore, open_store


def _store(path: Path, batch: int) -> PartitionStore:
    return PartitionStore(path, batch, 0, 0)


def test_a_batch_recorded_is_committed_in_its_replay_only(tmp_path: Path) -> None:
    store = _store(tmp_path / "p0", 4)
    offsets = ConsumedOffsets(store)
    assert not offsets.committed(100)  # nothing recorded yet
    offsets.record(100, 180)
    store.close()
    replay = _store(tmp_path / "p0", 4)
    again = ConsumedOffsets(replay)
    assert again.committed(100)
    again.check_end(180)
    replay.close()
    later = _store(tmp_path / "p0", 5)
    assert not ConsumedOffsets(later).committed(181)
    later.close()


def test_a_replay_over_other_offsets_is_refused_naming_both(tmp_path: Path) -> None:
    store = _store(tmp_path / "p0", 2)
    ConsumedOffsets(store).record(10, 20)
    store.close()
    replay = _store(tmp_path / "p0", 2)
    offsets = ConsumedOffsets(replay)
    with pytest.raises(OffsetsDisagree, match="offsets 10 to 20, and runs again from offset 11"):
        offsets.committed(11)
    with pytest.raises(OffsetsDisagree, match="up to offset 25"):
        offsets.check_end(25)
    replay.close()


def test_the_record_is_under_its_changelog_key(tmp_path: Path) -> None:
    store = _store(tmp_path / "p0", 7)
    ConsumedOffsets(store).record(3, 9)
    store.close()
    db = open_store(tmp_path / "p0")
    try:
        assert decode(db.get(CHANGELOG_KEY)) == (7, 3, 9)
    finally:
        db.close()


def test_what_a_committed_batch_saw_is_read_back_by_its_replay_only(tmp_path: Path) -> None:
    """The stats committed with a partition's batch: a replay of that batch (which skips
    the partition) reports them; a later batch, or a batch that saw nothing, has none."""
    store = _store(tmp_path / "p0", 4)
    ConsumedOffsets(store).record(100, 180, '{"fresh":{"ks.t":[3,0,0,0,0,0,0,0,0,0,0,0,1.5]}}')
    store.close()
    replay = _store(tmp_path / "p0", 4)
    again = ConsumedOffsets(replay)
    assert again.committed(100)
    assert again.stats == '{"fresh":{"ks.t":[3,0,0,0,0,0,0,0,0,0,0,0,1.5]}}'
    again.record(100, 180)  # (as the replay's close leaves it: check_end only, in the job)
    replay.close()
    later = _store(tmp_path / "p0", 5)
    assert ConsumedOffsets(later).stats is None  # batch 4's are not batch 5's
    ConsumedOffsets(later).record(181, 190)  # batch 5 saw nothing to report
    later.close()
    assert ConsumedOffsets(_store(tmp_path / "p0", 5)).stats is None
