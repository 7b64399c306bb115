"""Which commit log position is fully acknowledged by Kafka: the per-segment watermark.

Records of one mutation share its position; acks come back in any order across partitions.
The watermark is the highest position P such that every record produced with a position <= P
was acknowledged. Pure bookkeeping, no I/O.
"""

from __future__ import annotations

from collections import deque


class _Pending:
    __slots__ = ("left", "position")

    def __init__(self, position: int, left: int) -> None:
        self.position = position
        self.left = left


class WatermarkTracker:
    """Outstanding records of one segment, by mutation position, in production order."""

    def __init__(self, start: int) -> None:
        self.watermark = start
        self._last = start
        self._queue: deque[_Pending] = deque()

    def add(self, position: int, records: int) -> _Pending:
        """Register a mutation produced with `records` records; returns its ack token."""
        if position <= self._last:
            raise ValueError(f"positions must increase: {position} after {self._last}")
        self._last = position
        pending = _Pending(position, records)
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
