"""The sweeps under way in one partition store: work that must visit every key of a table
the store holds (a TRUNCATE's `d` events, a reset's, a truncate barrier's `r` events), done
a bounded number of keys per micro-batch, so a task's transaction is sized by its batch and
not by the table (`materializer.task.table_sweep` does the keys' work).

A sweep is a store entry (`w` + kind + table id): its kind, the raw record that started it
(a table-truncated record or a truncate barrier) and its offset, the table version it last
met, and its cursor, the last raw key it did in key order. Keys come to it in key order,
so every key after the cursor is still to do. A key the merge touches before the sweep
gets there is done first, out of turn: a TRUNCATE's work can be done twice (it removes
what the floor covers, which is then gone); a reset's and a barrier's cannot, so those
keys are marked (`v` + kind + raw key) and the sweep passes them by.

Replays: sweeps, cursors and marks are entries, written with `PartitionStore.put`, so a
micro-batch that runs again finds them as the batch before it left them, as it does every
key's state.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from materializer.store.layout import SWEEP, SWEPT
from materializer.store.partition_store import PartitionStore
from shared.topic_names import TABLE_ID_SIZE

RESET, TRUNCATE, REWRITE = b"x", b"t", b"r"
KINDS = (RESET, TRUNCATE, REWRITE)  # the order a key meets its sweeps in
MARKED = (RESET, REWRITE)  # a key they do out of turn is marked
# offset of the starting record, then the lengths of the cursor and the table version
_HEAD = struct.Struct(">qHH")


@dataclass
class Sweep:
    """One sweep of a table's keys in a store."""

    kind: bytes  # RESET, TRUNCATE or REWRITE
    table_id: bytes
    offset: int  # the raw offset of the record that started it
    control: bytes  # that record's value (a table-truncated record, a truncate barrier)
    version: str = ""  # a schema hash of the table seen by it ("": none yet)
    cursor: bytes = b""  # the last raw key done, in key order (b"": none)

    def ahead(self, raw_key: bytes) -> bool:
        """Whether `raw_key` (of this sweep's table) comes after the cursor."""
        return raw_key > self.cursor

    def pack(self) -> bytes:
        """The sweep's entry value."""
        version = self.version.encode()
        return (_HEAD.pack(self.offset, len(self.cursor), len(version)) + self.cursor
                + version + self.control)

    @classmethod
    def unpack(cls, kind: bytes, table_id: bytes, raw: bytes) -> Sweep:
        """A sweep from its entry value."""
        offset, n_cursor, n_version = _HEAD.unpack_from(raw)
        at = _HEAD.size
        cursor = raw[at:at + n_cursor]
        at += n_cursor
        version = raw[at:at + n_version].decode()
        return cls(kind, table_id, offset, raw[at + n_version:], version, cursor)


def _sweep_key(kind: bytes, table_id: bytes) -> bytes:
    return SWEEP + kind + table_id


def _mark_key(kind: bytes, raw_key: bytes) -> bytes:
    return SWEPT + kind + raw_key


class TableSweeps:
    """The sweeps under way in one open store, as this batch has them."""

    def __init__(self, store: PartitionStore) -> None:
        self.store = store
        self.by_table: dict[bytes, dict[bytes, Sweep]] = {}  # table id → kind → sweep
        self._saved: dict[bytes, bytes] = {}  # each sweep's entry as the store has it
        for key in store.entry_keys(SWEEP):
            raw = store.get(key)
            if raw is not None:  # (None: a sweep this batch's earlier attempt started)
                kind, table_id = key[1:2], key[2:]
                self.by_table.setdefault(table_id, {})[kind] = Sweep.unpack(kind, table_id,
                                                                            raw)
                self._saved[key] = raw

    def under_way(self) -> list[Sweep]:
        """Every sweep under way, each table's in KINDS order."""
        return [s for sweeps in self.by_table.values() for k in KINDS
                if (s := sweeps.get(k)) is not None]

    def of(self, raw_key: bytes) -> dict[bytes, Sweep]:
        """The sweeps under way of the table of `raw_key`, by kind."""
        return self.by_table.get(raw_key[:TABLE_ID_SIZE], {})

    def start(self, sweep: Sweep) -> None:
        """Start `sweep` at its table's first key; one of its kind under way is started
        again (its marks cleared): the later record stands for both."""
        old = self.by_table.get(sweep.table_id, {}).get(sweep.kind)
        if old is not None:
            self._clear_marks(old)
            sweep.version = sweep.version or old.version
        self.by_table.setdefault(sweep.table_id, {})[sweep.kind] = sweep
        self.save(sweep)

    def save(self, sweep: Sweep) -> None:
        """Write the sweep's cursor and version to the store (if they moved)."""
        key, value = _sweep_key(sweep.kind, sweep.table_id), sweep.pack()
        if self._saved.get(key) != value:
            self.store.put(key, value)
            self._saved[key] = value

    def save_all(self) -> None:
        """Write every sweep under way whose cursor or version moved."""
        for sweep in self.under_way():
            self.save(sweep)

    def finish(self, sweep: Sweep) -> None:
        """The sweep is through (or its table was dropped): gone, with its marks."""
        self._clear_marks(sweep)
        key = _sweep_key(sweep.kind, sweep.table_id)
        self.store.put(key, None)
        self._saved.pop(key, None)
        sweeps = self.by_table.get(sweep.table_id, {})
        if sweeps.get(sweep.kind) is sweep:
            del sweeps[sweep.kind]
            if not sweeps:
                del self.by_table[sweep.table_id]

    def pending(self, sweep: Sweep, raw_key: bytes) -> bool:
        """Whether `sweep` still has `raw_key` to do: after its cursor, not marked done."""
        return sweep.ahead(raw_key) and not (
            sweep.kind in MARKED and self.store.get(_mark_key(sweep.kind, raw_key))
            is not None)

    def mark(self, sweep: Sweep, raw_key: bytes) -> None:
        """`raw_key`, after the cursor, is done: the sweep passes it by (RESET, REWRITE)."""
        self.store.put(_mark_key(sweep.kind, raw_key), b"")

    def _clear_marks(self, sweep: Sweep) -> None:
        for key in self.store.entry_keys(_mark_key(sweep.kind, sweep.table_id)):
            if self.store.get(key) is not None:
                self.store.put(key, None)
