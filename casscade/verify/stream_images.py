"""The stream's side: the latest image of every key of one event topic.

The event topics are what consumers read, so they are what is verified (the job's state
could be right while its sink lost an event). A topic is read to the end it has at the
time, compacted or not, and read on from there at each recheck. The image of a key is the
`after` of its last event (None after a `d`); tombstones only confirm a delete. A truncate
event (`op: t`, no key) empties its partition, as a consumer that truncates on it would.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from casscade.verify.event_decoder import EventDecodeError, EventDecoder
from shared.kafka_topics import read_to_end


def key_text(key: Mapping[str, Any]) -> str:
    """A key's identity: its columns as JSON text, names sorted."""
    return json.dumps(key, sort_keys=True, separators=(",", ":"))


@dataclass
class StreamImages:
    """Reads one event topic and keeps each key's latest image and the stream's position
    (the newest write time, µs, of any change it has shown)."""

    kafka: Mapping[str, str]
    topic: str
    decoder: EventDecoder
    keep: Callable[[dict[str, Any]], bool] = lambda _key: True  # a sample's keys only
    images: dict[str, dict[str, Any] | None] = field(default_factory=dict)  # by key_text
    position_us: int = 0
    events: int = 0
    _next: dict[int, int] = field(default_factory=dict)
    _partition: dict[str, int] = field(default_factory=dict)  # key_text → its partition

    def catch_up(self, progress: Callable[[int], None] = lambda _n: None) -> int:
        """Read every event written since the last call; returns how many."""
        read = 0
        for msg in read_to_end(self.kafka, self.topic, start=self._next):
            self._next[msg.partition()] = msg.offset() + 1
            read += 1
            if read % 10_000 == 0:
                progress(read)
            if msg.value() is None:
                continue  # the tombstone after a `d`: the `d` itself said it
            where = f"{self.topic}[{msg.partition()}]@{msg.offset()}"
            try:
                key = None if msg.key() is None else self.decoder.key(msg.key())
                value = self.decoder.value(msg.value())
                if key is None and value.get("op") != "t":
                    raise ValueError("an event without a key that is not a truncate event")
            except (EventDecodeError, ValueError, KeyError, TypeError) as exc:
                raise EventDecodeError(f"{where}: not an event of events.format="
                                       f"{self.decoder.settings.format}: {exc}") from None
            assert value is not None
            if key is None:  # a truncate event: every key of its partition is gone
                for text, part in self._partition.items():
                    if part == msg.partition():
                        self.images[text] = None
                self.events += 1
                continue
            if not self.keep(key):
                continue
            text = key_text(key)
            self.images[text] = value.get("after")
            self._partition[text] = msg.partition()
            self.events += 1
            source = value.get("source") or {}
            if source.get("snapshot") != "true" and source.get("ts_us"):
                self.position_us = max(self.position_us, int(source["ts_us"]))
        return read
