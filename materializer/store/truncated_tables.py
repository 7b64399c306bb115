"""The truncated tables of one partition store: each table's truncation floor, the write
time (µs) at and below which its TRUNCATEs removed every cell.

A floor rises when a table-truncated record with a later time arrives
(`shared.table_truncate`); the task then removes the covered cells of every key of the table
the store holds, and each later record of the table is merged under the floor (a lagging
publisher's copy of a write from before the truncation changes nothing).

Replays: a store's writes of a micro-batch roll back when the batch runs again, so the
record keeps the floor from before the batch that raised it; a batch that runs again sees
that floor and raises it again, removing the same cells.
"""

from __future__ import annotations

import struct

from materializer.store.partition_store import PartitionStore

_NAME = b"truncated/"  # + the table id: the store record of a truncated table
# the floor (µs), the batch that raised it to that, the floor before that batch
_STATE = struct.Struct(">qqq")
_NONE = -(1 << 63)  # "no floor" in a record's before-field


class TruncatedTables:
    """The truncation floors of one open store."""

    def __init__(self, store: PartitionStore) -> None:
        self.store = store
        self.floors: dict[bytes, int] = {}  # table id → its floor as of this batch
        for name, raw in store.records(_NAME).items():
            floor, batch, before = _STATE.unpack(raw)
            # raised by this batch's earlier attempt: its removals rolled back with it
            value = before if batch >= store.batch else floor
            if value != _NONE:
                self.floors[name[len(_NAME):]] = value
        self._before = dict(self.floors)

    def floor(self, table_id: bytes) -> int | None:
        """The table's truncation floor (µs), None if it was never truncated."""
        return self.floors.get(table_id)

    def raise_to(self, table_id: bytes, floor_us: int) -> bool:
        """Raise the table's floor to `floor_us`; False if it is there already (a truncation
        applied before: another replica's record of it, or one announced again)."""
        old = self.floors.get(table_id)
        if old is not None and old >= floor_us:
            return False
        self.floors[table_id] = floor_us
        before = self._before.get(table_id, _NONE)
        self.store.set_record(_NAME + table_id, _STATE.pack(floor_us, self.store.batch, before))
        return True

