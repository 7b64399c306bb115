"""The event rule: which change events one key's records produce (design §4).

For each key and micro-batch: first report TTL expiry that happened since the images were
last evaluated, then apply the records one by one: bootstrap snapshot records first (the
base), then the others in write-time order (ties broken on the record bytes, so any arrival
order and any duplication of the same records gives the same events), and compare the
touched rows' images before and after each record.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from materializer.image import (
    STATIC_ONLY,
    Image,
    drop_dropped,
    forget_dropped,
    next_expiry,
    partition_images,
    purge,
    record_expiry,
    row_image,
    row_values,
)
from materializer.merge import Merger, record_timestamp
from materializer.model import Clustering, PartitionState

PURGE_EVERY_S = 3600


@dataclass(frozen=True, slots=True)
class Change:
    """One visible change of one row: op c/u/d, images, and the record that caused it."""

    op: str
    clustering: Clustering
    before: Image | None
    after: Image | None
    cause: dict[str, Any] | None  # the RowUpdate; None for a TTL expiry
    ts_us: int  # write time of the change (expiry time for an expiry)


def op_of(before: Image | None, after: Image | None) -> str | None:
    """c (appears), u (changed), d (disappears) or None (no visible change)."""
    if before is None:
        return None if after is None else "c"
    if after is None:
        return "d"
    return None if before == after else "u"


class KeyProcessor:
    """Applies a batch of one partition's records to its state and lists the changes."""

    def __init__(self, merger: Merger, has_static: bool, gc_grace_s: int,
                 dropped: dict[str, int] | None = None) -> None:
        self.merger = merger
        self.has_static = has_static
        self.gc_grace_s = gc_grace_s
        self.dropped = dropped or {}  # column → drop time (µs), from the table schema

    def process(self, state: PartitionState, records: Iterable[tuple[dict[str, Any], bytes]],
                now_s: int) -> list[Change]:
        """Apply (record, raw value bytes) pairs; returns the changes in order."""
        changes = self.expire(state, now_s)
        ordered = sorted(records, key=_apply_order)
        if self.dropped:
            changes += self._forget_dropped(state, now_s)
        for rec, _raw in ordered:
            if self.dropped:
                drop_dropped(rec, self.dropped)
            changes += self._apply(state, rec, now_s)
            # No full scan per batch: an earlier-than-needed expiry is harmless (expire()
            # finds nothing and rescans), a missed one is not, and only new cells add one.
            expiry = record_expiry(rec, now_s)
            if expiry is not None and (state.next_expiry is None or expiry < state.next_expiry):
                state.next_expiry = expiry
        state.evaluated_at = now_s
        if now_s - state.last_purge >= min(self.gc_grace_s, PURGE_EVERY_S):
            purge(state, now_s, self.gc_grace_s)
        return changes

    def expire(self, state: PartitionState, now_s: int) -> list[Change]:
        """Changes made by TTLs that ran out between the last evaluation and `now_s`."""
        if state.next_expiry is None or state.next_expiry > now_s:
            state.evaluated_at = max(state.evaluated_at, now_s)
            return []
        before = partition_images(state, state.evaluated_at)
        after = partition_images(state, now_s)
        state.evaluated_at = now_s
        state.next_expiry = next_expiry(state, now_s)
        out = []
        for ck in sorted(before.keys() | after.keys(), key=self.merger.order.key):
            op = op_of(before.get(ck), after.get(ck))
            if op is not None:
                out.append(Change(op, ck, before.get(ck), after.get(ck), None,
                                  now_s * 1_000_000))
        return out

    def _forget_dropped(self, state: PartitionState, now_s: int) -> list[Change]:
        """A row only a dropped column kept alive is gone: `d` for it (no record caused it)."""
        dropped = self.dropped
        rows = [*state.rows.values(), state.static]
        if not any(k[0] in dropped and c[1] <= dropped[k[0]]
                   for r in rows if r is not None for k, c in r.cells.items()):
            return []  # the usual case: a cheap scan, no images
        before = partition_images(state, now_s)
        forget_dropped(state, dropped)
        after = partition_images(state, now_s)
        return [Change("d", ck, before[ck], None, None, now_s * 1_000_000)
                for ck in sorted(before.keys() - after.keys(), key=self.merger.order.key)]

    def _touched(self, state: PartitionState, rec: dict[str, Any]) -> list[Clustering]:
        kind = rec["kind"]
        extra = [STATIC_ONLY] if self.has_static and STATIC_ONLY not in state.rows else []
        if kind in ("ROW", "SNAPSHOT_ROW"):
            return [tuple(rec["clustering"]), *extra]
        if kind == "RANGE_TOMBSTONE":
            r = rec["range"]
            inside = [ck for ck in state.rows
                      if self.merger.order.in_range(ck, tuple(r["start"]), r["start_inclusive"],
                                                    tuple(r["end"]), r["end_inclusive"])]
            return inside + extra
        return list(state.rows) + extra  # static row, partition deletion: every row

    def _apply(self, state: PartitionState, rec: dict[str, Any], now_s: int) -> list[Change]:
        touched = self._touched(state, rec)
        static = row_values(state.static, now_s) if state.static is not None else {}
        before = {ck: row_image(state, ck, now_s, static) for ck in touched}
        self.merger.apply(state, rec)
        static = row_values(state.static, now_s) if state.static is not None else {}
        ts = record_timestamp(rec)
        out = []
        for ck in sorted(set(touched), key=self.merger.order.key):
            b = before.get(ck)
            a = row_image(state, ck, now_s, static)
            op = op_of(b, a)
            if op is not None:
                out.append(Change(op, ck, b, a, rec, ts))
        return out


def from_snapshot(rec: dict[str, Any]) -> bool:
    """Written by `casscade snapshot` (its rows, and its static-column records)."""
    if rec["kind"] == "SNAPSHOT_ROW":
        return True
    source = rec.get("source")
    return source is not None and source["file"].startswith("snapshot:")


def _apply_order(item: tuple[dict[str, Any], bytes]) -> tuple:
    # Snapshot records first (static columns before rows, so a read shows the whole row):
    # they are the base the live writes change. Then write-time order, ties by bytes.
    rec, raw = item
    snap = from_snapshot(rec)
    return (not snap, snap and rec["kind"] != "STATIC_ROW", record_timestamp(rec), raw)
