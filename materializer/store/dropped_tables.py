"""The tables dropped in one partition store: freeing their keys' state, and keeping their
late records out.

A drop is done in two steps, so a replayed micro-batch still rolls back: the batch that
meets a table-dropped record removes every entry of the table through the store's batch
rule (each keeps its value before the batch, in case the batch runs again); the first task
of a later batch, which no replay can undo, removes those entries for good (their
tombstones reach the changelog, whose compaction then drops them).

A table's records that arrive in a batch after its drop (a lagging publisher's copies) are
not merged: the table is gone, and a new table of the same name has another id.
"""

from __future__ import annotations

import logging
import struct

from materializer.store.layout import table_prefixes
from materializer.store.partition_store import PartitionStore

log = logging.getLogger(__name__)
_NAME = b"dropped/"  # + the table id: the store record of a dropped table
_STATE = struct.Struct(">q?")  # the batch that dropped it, whether its entries are gone for good


class DroppedTables:
    """The dropped tables of one open store; opening it finishes the drops of earlier
    batches."""

    def __init__(self, store: PartitionStore) -> None:
        self.store = store
        self.dropped: dict[bytes, int] = {}  # table id -> the batch that dropped it
        for name, raw in store.records(_NAME).items():
            batch, purged = _STATE.unpack(raw)
            table_id = name[len(_NAME):]
            self.dropped[table_id] = batch
            if batch < store.batch and not purged:
                self._purge(table_id, batch)

    def dropped_before(self, table_id: bytes) -> bool:
        """Whether an earlier micro-batch dropped this table (its records are not merged)."""
        batch = self.dropped.get(table_id)
        return batch is not None and batch < self.store.batch

    def drop(self, table_id: bytes) -> int:
        """Remove every entry of the table in this batch; how many held state (0 when an
        earlier batch dropped it)."""
        if self.dropped_before(table_id):
            return 0
        freed = remove_table(self.store, table_id)
        self.dropped[table_id] = self.store.batch
        self.store.set_record(_NAME + table_id, _STATE.pack(self.store.batch, False))
        return freed

    def _purge(self, table_id: bytes, batch: int) -> None:
        """The second step of a drop: its entries gone for good."""
        count = 0
        for prefix in table_prefixes(table_id):
            for key in self.store.entry_keys(prefix):
                if self.store.get(key) is None:  # else written again (a table id is unique:
                    self.store.forget(key)       # never, but keep what is not ours to drop)
                    count += 1
        self.store.set_record(_NAME + table_id, _STATE.pack(batch, True))
        log.info("a dropped table's entries removed for good",
                 extra={"store": str(self.store.path), "table_id": table_id.hex(),
                        "entries": count})


def remove_table(store: PartitionStore, table_id: bytes) -> int:
    """Remove every entry and page of a table in the store's current batch (rolled back if
    the batch runs again); how many held state. A drop's first step."""
    freed = 0
    for prefix in table_prefixes(table_id):
        for key in store.entry_keys(prefix):
            if store.get(key) is not None:
                freed += 1
                store.put(key, None)
    return freed
