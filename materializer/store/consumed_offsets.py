"""The raw offsets the last committed micro-batch of a store consumed (exactly-once
delivery): a store record written in the partition's transaction with its events and
changelog writes, so it is committed exactly when they are.

What it is for: Spark runs a micro-batch again when its own commit did not happen (the
driver killed after the tasks committed their transactions), and the new attempt of a
partition must then write nothing. The attempt opens the store (caught up with the
changelog, which holds only committed transactions) and finds the batch recorded: it skips
the partition's records. A batch recorded with other offsets than the attempt reads means
the checkpoint's offsets and the store disagree; that stops the task with both ranges named.

Beside it, what the partition's batch saw for the job's metrics (its events' freshness per
table, and the rest of materializer.task.task_stats), committed with it: the attempt that
skips the partition reports them in its place. A micro-batch's metrics come from its tasks'
last attempts, so without them an attempt that committed a partition and then failed (or a
batch run again after the driver's death) would leave that partition's events uncounted.
"""

from __future__ import annotations

import struct

from materializer.store.partition_store import PartitionStore, record_key

_NAME = b"raw-offsets"
_VALUE = struct.Struct(">qqq")  # batch, first offset, last offset
_STATS = b"raw-offsets-stats"  # batch (as _BATCH), then the batch's stats as JSON
_BATCH = struct.Struct(">q")
CHANGELOG_KEY = record_key(_NAME)  # the record's key in the changelog


def decode(value: bytes) -> tuple[int, int, int]:
    """(batch, first raw offset, last raw offset) of a record (for operators and tests)."""
    batch, first, last = _VALUE.unpack(value)
    return batch, first, last


class OffsetsDisagree(Exception):
    """A replayed batch reads other raw offsets than the committed one consumed."""


class ConsumedOffsets:
    """The record of what one open store's partition consumed in its last committed batch."""

    def __init__(self, store: PartitionStore) -> None:
        self.store = store
        raw = store.record(_NAME)
        self.batch, self.first, self.last = (-1, -1, -1) if raw is None else _VALUE.unpack(raw)

    @property
    def stats(self) -> str | None:
        """What this store's batch saw, as its commit recorded it (JSON; None: nothing).
        Read when asked: only an attempt that skips a committed partition needs it."""
        raw = self.store.record(_STATS)
        # (a record of another batch is an earlier one's: this batch saw nothing to report)
        if raw is None or _BATCH.unpack_from(raw)[0] != self.store.batch:
            return None
        return raw[_BATCH.size:].decode()

    def committed(self, first_offset: int) -> bool:
        """Whether this store's batch already committed, read from raw offset
        `first_offset` on (then the attempt writes nothing)."""
        if self.batch != self.store.batch:
            return False
        if first_offset != self.first:
            raise OffsetsDisagree(
                f"{self.store.path}: micro-batch {self.batch} committed raw offsets "
                f"{self.first} to {self.last}, and runs again from offset {first_offset}: "
                "the checkpoint and the store do not belong together")
        return True

    def check_end(self, last_offset: int) -> None:
        """A committed batch, replayed: its last raw offset must be the one recorded."""
        if last_offset != self.last:
            raise OffsetsDisagree(
                f"{self.store.path}: micro-batch {self.batch} committed raw offsets "
                f"{self.first} to {self.last}, and runs again up to offset {last_offset}: "
                "the checkpoint and the store do not belong together")

    def record(self, first_offset: int, last_offset: int, stats: str | None = None) -> None:
        """Record the raw offsets this batch consumed, and what it saw (`stats`: JSON, None
        for nothing), both written in its transaction."""
        self.store.set_record(_NAME, _VALUE.pack(self.store.batch, first_offset, last_offset))
        if stats is not None:
            self.store.set_record(_STATS, _BATCH.pack(self.store.batch) + stats.encode())
