"""One partition kept in pages, as a partition store keeps it, run through the change detector."""

from __future__ import annotations

from typing import Any

from materializer.rules.events import ChangeDetector
from materializer.rules.image import partition_images
from materializer.rules.merge import Merger
from materializer.rules.model import PartitionState, rows_from_bytes
from materializer.rules.pages import attach, pages_to_load, store

from support.records import ORDER, TABLE, published


def detector() -> ChangeDetector:
    return ChangeDetector(Merger(ORDER), any(c.kind == "static" for c in TABLE.columns), 3600)


class Paged:
    """One partition kept the way a partition store keeps it: an entry plus page entries."""

    def __init__(self, page_rows: int) -> None:
        self.page_rows = page_rows
        self.entry: bytes | None = None
        self.pages: dict[int, bytes] = {}
        self.loaded: list[int] = []  # page ids the last batch read

    def run(self, records: list[dict[str, Any]] | None, now_s: int) -> list[tuple]:
        """A batch of records (None: its expiry is due); returns the changes."""
        state = PartitionState.loads(self.entry) if self.entry else PartitionState()
        self.loaded = pages_to_load(state, records or [], now_s, ORDER)
        attach(state, self.loaded, [self.pages.get(p) for p in self.loaded], "test")
        proc = detector()
        changes = (proc.expire(state, now_s) if records is None
                   else proc.process(state, published(records), now_s))
        self.entry, writes = store(state, ORDER, now_s, self.page_rows)
        for pid, blob in writes.items():
            if blob is None:
                del self.pages[pid]
            else:
                self.pages[pid] = blob
        return [(c.op, c.clustering, c.before, c.after, c.ts_us) for c in changes]

    def visible(self, now_s: int) -> dict:
        state = PartitionState.loads(self.entry) if self.entry else PartitionState()
        for blob in self.pages.values():
            state.rows.update(rows_from_bytes(blob))
        assert len(state.rows) == sum(1 for _ in state.rows)  # no row held twice
        return partition_images(state, now_s)
