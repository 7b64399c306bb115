"""The event rule: which change events one key's records produce
(docs/architecture.md "One mutation, one change").

For each key and micro-batch: first report TTL expiry that happened since the images were
last evaluated, then apply the records mutation by mutation: bootstrap snapshot records
first (the base), then the others in write-time order (ties broken on the record bytes, so
any arrival order and any duplication of the same records gives the same events), and
compare the touched rows' images before and after each mutation.

One mutation is one change. The publisher splits a commit log mutation into single-row
records that share a mutation id (the update's newest write time and a digest of its
content, the same on every replica); Cassandra applies a mutation atomically, so no reader
ever sees it half applied (an INSERT of a static and a regular column never shows the
static-only row between the two). Its records are applied together and compared once,
whichever replicas the copies in the batch came from (the copy dedupe may keep one record's
copy from one replica and the next record's from another), in the order of the mutations'
write times from their ids. Mutations with the same write time are concurrent to Cassandra
(its tie rules settle them, not their order), so they too are one change.
Limitation: a mutation whose records straddle two micro-batches is compared per part, as
two changes (not rare when a record limit per batch slices a small topic thin).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from materializer.rules.image import (
    STATIC_ONLY,
    Image,
    VisibleForm,
    drop_dropped,
    forget_dropped,
    next_expiry,
    partition_images,
    purge,
    record_expiry,
    row_image,
    row_values,
)
from materializer.rules.merge import Merger, record_timestamp
from materializer.rules.model import Clustering, PartitionState
from shared.rowupdate import mutation_of_value, mutation_time_of_value

PURGE_EVERY_S = 3600
Item = tuple[dict[str, Any], bytes]  # (RowUpdate, its raw bytes)
ROW_KINDS = frozenset({"ROW", "SNAPSHOT_ROW"})


@dataclass(frozen=True, slots=True)
class Change:
    """One visible change of one row: op c/u/d, images, and the record that caused it."""

    op: str
    clustering: Clustering
    before: Image | None
    after: Image | None
    cause: dict[str, Any] | None  # the RowUpdate; None for a TTL expiry
    ts_us: int  # write time of the change (expiry time for an expiry)


def op_of(before: Image | None, after: Image | None,
          visible: VisibleForm | None = None) -> str | None:
    """c (appears), u (changed), d (disappears) or None (no visible change; `visible`
    compares what a reader sees where raw images differ invisibly)."""
    if before is None:
        return None if after is None else "c"
    if after is None:
        return "d"
    if before == after or (visible is not None and visible.same(before, after)):
        return None
    return "u"


class ChangeDetector:
    """Applies a batch of one partition's records to its state and lists the changes."""

    def __init__(self, merger: Merger, has_static: bool, gc_grace_s: int,
                 dropped: dict[str, int] | None = None,
                 visible: VisibleForm | None = None) -> None:
        self.merger = merger
        self.has_static = has_static
        self.gc_grace_s = gc_grace_s
        self.dropped = dropped or {}  # column → drop time (µs), from the table schema
        self.visible = visible  # list and counter columns: compared as a reader sees them

    def process(self, state: PartitionState, records: Iterable[Item],
                now_s: int) -> list[Change]:
        """Apply (record, raw value bytes) pairs; returns the changes in order."""
        changes = self.expire(state, now_s)
        groups = mutation_groups(records)
        if self.dropped:
            changes += self._forget_dropped(state, now_s)
        for group in groups:
            recs = [rec for rec, _raw in group]
            if self.dropped:
                for rec in recs:
                    drop_dropped(rec, self.dropped)
            changes += self._apply(state, recs, now_s)
            for rec in recs:
                # No full scan per batch: an earlier-than-needed expiry is harmless (expire()
                # finds nothing and rescans), a missed one is not, and only new cells add one.
                expiry = record_expiry(rec, now_s)
                if expiry is not None and (state.next_expiry is None
                                           or expiry < state.next_expiry):
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
            op = op_of(before.get(ck), after.get(ck), self.visible)
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

    def _apply(self, state: PartitionState, recs: list[dict[str, Any]],
               now_s: int) -> list[Change]:
        """Apply one mutation's records; compare the rows they touch before and after all."""
        # Touched sets are taken before any record is applied: a row can only appear through
        # a ROW record, which names its own clustering, so this union covers every row whose
        # image can change (and a row another record of the group removes is in it too).
        causes: dict[Clustering, tuple[int, int, dict[str, Any]]] = {}
        for pos, rec in enumerate(recs):
            for ck in self._touched(state, rec):
                rank = _cause_rank(rec, ck)
                old = causes.get(ck)
                if old is None or (rank, pos) < old[:2]:
                    causes[ck] = (rank, pos, rec)
        static = row_values(state.static, now_s) if state.static is not None else {}
        before = {ck: row_image(state, ck, now_s, static) for ck in causes}
        for rec in recs:
            self.merger.apply(state, rec)
        static = row_values(state.static, now_s) if state.static is not None else {}
        out = []
        for ck in sorted(causes, key=self.merger.order.key):
            b = before[ck]
            a = row_image(state, ck, now_s, static)
            op = op_of(b, a, self.visible)
            if op is not None:
                cause = causes[ck][2]
                out.append(Change(op, ck, b, a, cause, record_timestamp(cause)))
        return out


def _cause_rank(rec: dict[str, Any], ck: Clustering) -> int:
    """How well a record of a mutation explains a change of row `ck` (lowest is named its
    cause): the row's own record (ROW of that clustering; STATIC_ROW for the static-only
    row), then a deletion over it (range tombstone before partition deletion: the narrower
    one), then the rest (a static row write for a clustering row; a row write, which hides
    the static-only row). Ties: the first in the group's order."""
    kind = rec["kind"]
    if kind in ROW_KINDS and tuple(rec["clustering"]) == ck:
        return 0  # first: in a table without clustering columns the one row's key is ()
    if ck == STATIC_ONLY:
        return {"STATIC_ROW": 0, "PARTITION_DELETION": 1}.get(kind, 3)
    return {"RANGE_TOMBSTONE": 1, "PARTITION_DELETION": 2}.get(kind, 3)


def from_snapshot(rec: dict[str, Any]) -> bool:
    """Written by `casscade snapshot` (its rows, and its static-column records)."""
    if rec["kind"] == "SNAPSHOT_ROW":
        return True
    source = rec.get("source")
    return source is not None and source["file"].startswith("snapshot:")


def mutation_of(rec: dict[str, Any], raw: bytes) -> bytes | None:
    """The id of the commit log mutation a live record was split from; None for a snapshot
    record or one without a source (a group of its own)."""
    if rec.get("source") is None or from_snapshot(rec):
        return None
    return mutation_of_value(raw)


def mutation_groups(records: Iterable[Item]) -> list[list[Item]]:
    """The records grouped by mutation, in application order (see `_group_order`); inside
    a group by bytes (any order gives the same state: the merge is commutative). Live
    mutations with the same newest write time form one group."""
    items = records if isinstance(records, list) else list(records)
    if len(items) == 1:
        return [items]  # one record (the usual case at one change per key): one group
    groups: list[list[Item]] = []
    by_mutation: dict[bytes, list[Item]] = {}
    for item in items:
        mutation = mutation_of(*item)
        if mutation is None:
            groups.append([item])
            continue
        group = by_mutation.get(mutation)
        if group is None:
            group = by_mutation[mutation] = []
            groups.append(group)
        group.append(item)
    for group in by_mutation.values():
        group.sort(key=lambda item: item[1])
    keyed = sorted(((_group_order(g), g) for g in groups), key=lambda kg: kg[0])
    out: list[list[Item]] = []
    last: tuple | None = None
    for order, group in keyed:
        # Live mutations with one write time are concurrent: Cassandra settles them by its
        # tie rules (later expiry, then greater value), not by arrival, and a replica can hold
        # them in any order. Applied one by one in id order they could show states no replica
        # held (found on the ring: a TTL'd cell flipping a → b → a → b over four writes with one
        # timestamp whose expiry times differed by a second), so they are applied together.
        if out and order[0] and last is not None and last[0] and order[2] == last[2]:
            out[-1] = out[-1] + group
        else:
            out.append(group)
        last = order
    return out


def _group_order(group: list[Item]) -> tuple:
    # Snapshot records (each a group of its own) first, static columns before rows, so a
    # read shows the whole row: they are the base the live writes change. Then write-time
    # order: the mutation's newest write time, from its id (the same whichever of its
    # records and copies the batch holds); a group of one record without a mutation (see
    # `mutation_of`) by its own newest, as `record_timestamp` takes it. Ties by the
    # mutation id, then the records' bytes.
    rec, raw = group[0]
    snap = from_snapshot(rec)
    mutation = mutation_of(rec, raw)
    newest = record_timestamp(rec) if mutation is None else mutation_time_of_value(raw)
    return (not snap, snap and rec["kind"] != "STATIC_ROW", newest, mutation or b"",
            [raw for _rec, raw in group])
