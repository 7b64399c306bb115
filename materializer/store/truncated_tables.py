"""The truncated tables of one partition store: each table's truncation floor, the write
time (µs) at and below which its TRUNCATEs removed every cell.

A floor rises when a table-truncated record with a later time arrives
(`shared.table_truncate`); the task then removes the covered cells of every key of the table
the store holds, and each later record of the table is merged under the floor (a lagging
publisher's copy of a write from before the truncation changes nothing).

A reset (`casscade snapshot --reset`) empties the table's state and notes its time instead
of raising the floor: the snapshot's rows that follow carry their original write times,
and merge; a live record all of whose writes are at or before the reset is left out (a
late replica copy of a write the table has overwritten or deleted since: the snapshot
reads what the table holds). A reset also lifts the floor of a TRUNCATE before it, so the
snapshot can bring back rows the TRUNCATE met the wrong way (a write concurrent with it,
which Cassandra kept).

Replays: a store's writes of a micro-batch roll back when the batch runs again, so the
record keeps the floor from before the batch that raised it; a batch that runs again sees
that floor and raises it again, removing the same cells.
"""

from __future__ import annotations

import struct

from materializer.store.partition_store import PartitionStore

_NAME = b"truncated/"  # + the table id: the store record of a truncated table
_RESET = b"reset/"  # + the table id: the store record of a table's last reset
# the floor (µs), the batch that raised it to that, the floor before that batch
_STATE = struct.Struct(">qqq")
_NONE = -(1 << 63)  # "no floor" in a record's before-field


class TruncatedTables:
    """The truncation floors and reset times of one open store."""

    def __init__(self, store: PartitionStore) -> None:
        self.store = store
        self.floors = self._read(_NAME)  # table id → its floor as of this batch
        self.resets = self._read(_RESET)  # table id → its last reset's time, likewise
        self._before = {_NAME: dict(self.floors), _RESET: dict(self.resets)}

    def _read(self, prefix: bytes) -> dict[bytes, int]:
        found = {}
        for name, raw in self.store.records(prefix).items():
            floor, batch, before = _STATE.unpack(raw)
            # raised by this batch's earlier attempt: its removals rolled back with it
            value = before if batch >= self.store.batch else floor
            if value != _NONE:
                found[name[len(prefix):]] = value
        return found

    def floor(self, table_id: bytes) -> int | None:
        """The table's truncation floor (µs) its records are merged under: None if it was
        never truncated, or was reset since (a reset's snapshot reads the table as it is,
        rows a TRUNCATE met the wrong way included)."""
        floor = self.floors.get(table_id)
        reset = self.resets.get(table_id)
        return None if floor is None or (reset is not None and reset >= floor) else floor

    def reset_floor(self, table_id: bytes) -> int | None:
        """The time (µs) of the table's last reset, if no TRUNCATE came after it: its live
        records written at or before it are left out (its snapshot's rows say what the
        table holds of that time; a late copy of an older write would bring back a row
        deleted before the reset)."""
        reset = self.resets.get(table_id)
        floor = self.floors.get(table_id)
        return None if reset is None or (floor is not None and floor > reset) else reset

    def raise_to(self, table_id: bytes, floor_us: int) -> bool:
        """Raise the table's floor to `floor_us`; False if it is there already (a truncation
        applied before: another replica's record of it, or one announced again)."""
        return self._raise(_NAME, self.floors, table_id, floor_us)

    def reset_at(self, table_id: bytes, at_us: int) -> None:
        """Note a reset of the table at `at_us` (a later one than any before)."""
        self._raise(_RESET, self.resets, table_id, at_us)

    def _raise(self, prefix: bytes, values: dict[bytes, int], table_id: bytes,
               value: int) -> bool:
        old = values.get(table_id)
        if old is not None and old >= value:
            return False
        values[table_id] = value
        before = self._before[prefix].get(table_id, _NONE)
        self.store.set_record(prefix + table_id, _STATE.pack(value, self.store.batch, before))
        return True
