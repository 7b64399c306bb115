"""The agent's progress store (publisher.agent.offset_store): a second agent on the same
`state.path` is refused in one line naming it, not with RocksDB's traceback."""

from __future__ import annotations

import pytest

from publisher.agent.offset_store import OffsetStore, SegmentState, StateInUse


def test_a_second_agent_on_the_same_state_is_refused_by_name(tmp_path) -> None:
    first = OffsetStore(tmp_path / "offsets")
    first.put(7, SegmentState(watermark=42))
    with pytest.raises(StateInUse, match=f"state.path {tmp_path} is in use: another agent"):
        OffsetStore(tmp_path / "offsets")
    # the first keeps its progress, and a reader beside it still reads it
    assert OffsetStore(tmp_path / "offsets", read_only=True).get(7).watermark == 42
    assert first.get(7).watermark == 42
