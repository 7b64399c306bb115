"""Which commit log position is fully acknowledged by Kafka: the per-segment watermark.

Records of one mutation share its position; acks come back in any order across partitions.
The watermark is the highest position P such that every record produced with a position <= P
was acknowledged. Pure bookkeeping, no I/O.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable


class _Pending:
    """The records of one mutation still waiting for Kafka; also the delivery callback."""

    __slots__ = ("left", "position", "tracker")

    def __init__(self, tracker: WatermarkTracker, position: int, left: int) -> None:
        self.tracker = tracker
        self.position = position
        self.left = left

    def __call__(self, err: object, _msg: object) -> None:
        """confluent-kafka's on_delivery: one record of this mutation is done."""
        tracker = self.tracker
        if err is not None:
            tracker.on_error(err)
            return
        tracker.acked += 1
        # WatermarkTracker.ack, inlined: this runs once per record
        left = self.left = self.left - 1
        if left == 0:
            queue = tracker._queue
            if queue and queue[0] is self:
                tracker._advance()
        elif left < 0:
            raise ValueError(f"more acks than records at position {self.position}")


class WatermarkTracker:
    """Outstanding records of one segment, by mutation position, in production order."""

    def __init__(self, start: int, on_error: Callable[[object], None] | None = None) -> None:
        self.watermark = start
        self.acked = 0  # records acknowledged through this tracker's tokens
        self.on_error = on_error or _raise
        self._last = start
        self._queue: deque[_Pending] = deque()

    def add(self, position: int, records: int) -> _Pending:
        """Register a mutation produced with `records` records; returns its ack token."""
        if position <= self._last:
            raise ValueError(f"positions must increase: {position} after {self._last}")
        self._last = position
        pending = _Pending(self, position, records)
        self._queue.append(pending)
        if records == 0:
            self._advance()
        return pending

    def ack(self, token: _Pending) -> None:
        """One record of `token`'s mutation was acknowledged."""
        token.left -= 1
        if token.left < 0:
            raise ValueError(f"more acks than records at position {token.position}")
        if token.left == 0 and self._queue and self._queue[0] is token:
            self._advance()

    def _advance(self) -> None:
        while self._queue and self._queue[0].left == 0:
            self.watermark = self._queue.popleft().position

    @property
    def in_flight(self) -> int:
        """Mutations produced but not yet fully acknowledged."""
        return len(self._queue)


def _raise(err: object) -> None:
    raise RuntimeError(f"Kafka delivery failed: {err}")
