"""What the soak counts in the event topics: events, changes, duplicates, and the two checks
`verify` does not make (no event without a visible change; every `before` is the previous
`after` of its key, on the table's columns now)."""

from __future__ import annotations

from dataclasses import dataclass, field

from support.materializer_harness import read_events
from support.ring_harness import event_chain, without_replays


@dataclass
class StreamCounts:
    """One table's events."""

    events: int = 0  # change events written (tombstones not counted)
    changes: int = 0  # the events without replays: one per change
    duplicates: int = 0  # events beyond one per change (a replay, same source position)
    no_ops: list[str] = field(default_factory=list)  # events that show no change
    broken_chains: list[str] = field(default_factory=list)  # before != the previous after


def stream_counts(bootstrap: str, topic: str) -> StreamCounts:
    """Read `topic` to its end and count (randomly ordered input is sorted by offset)."""
    events = read_events(bootstrap, topic, 60)
    out = StreamCounts(events=sum(1 for e in events if e[3] is not None))
    kept = without_replays(events)
    out.changes = sum(1 for e in kept if e[3] is not None)
    out.duplicates = out.events - out.changes
    out.no_ops, out.broken_chains = event_chain(kept)
    return out
