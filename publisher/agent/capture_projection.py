"""Partition updates as captured (shared.capture): excluded tables dropped, excluded columns
cut out, masked values replaced, before the record writer sees them."""

from __future__ import annotations

from publisher.commitlog.model import Cell, PartitionUpdate, Row
from shared.capture import EXCLUDE, KEEP, Capture, captured_table
from shared.schema import ColumnSchema, TableSchema


class _Plan:
    """What capture does to one table (one schema version of it)."""

    __slots__ = ("actions", "columns", "published", "source")

    def __init__(self, source: TableSchema, published: TableSchema | None,
                 actions: dict[str, str]) -> None:
        self.source = source
        self.published = published  # None: the table is not captured
        self.actions = actions  # column → EXCLUDE / HASH / CHARS
        self.columns: dict[str, ColumnSchema] = (
            {c.name: c for c in published.columns} if published is not None else {})


class UpdateProjection:
    """Applies the capture rules to decoded partition updates (a plan per table version)."""

    def __init__(self, capture: Capture) -> None:
        self.capture = capture
        self._plans: dict[int, _Plan] = {}

    def plan(self, table: TableSchema) -> _Plan:
        """The plan of `table` (CaptureError for a rule that cannot apply to it)."""
        plan = self._plans.get(id(table))
        if plan is None or plan.source is not table:
            if not self.capture.captures(table.keyspace, table.table):
                plan = _Plan(table, None, {})
            else:
                actions = self.capture.actions(table) if self.capture.projects else {}
                plan = _Plan(table, captured_table(table, actions), actions)
            self._plans[id(table)] = plan
        return plan

    def project(self, update: PartitionUpdate) -> PartitionUpdate | None:
        """`update` as captured; None when its table is not captured or nothing of it is."""
        plan = self.plan(update.table)
        if plan.published is None:
            return None
        if not plan.actions:
            return update
        rows = {id(r): self._row(r, plan) for r in update.rows}
        static = self._row(update.static_row, plan) if update.static_row is not None else None
        kept = [r for r in (rows[id(r)] for r in update.rows) if r is not None]
        unfiltered = None
        if update.unfiltered is not update.rows:  # rows and range markers interleaved
            unfiltered = [x for x in (rows.get(id(u), u) if isinstance(u, Row) else u
                                      for u in update.unfiltered) if x is not None]
        if (not kept and static is None and update.partition_deletion is None
                and not update.markers):
            return None  # it only wrote excluded columns
        return PartitionUpdate(plan.published, update.partition_key, update.partition_deletion,
                               static, kept, update.markers, unfiltered)

    def _row(self, row: Row, plan: _Plan) -> Row | None:
        """The row as captured; None when it only wrote excluded columns."""
        actions, cells = plan.actions, []
        for cell in row.cells:
            rule = actions.get(cell.column.name, KEEP)
            if rule == KEEP:
                cells.append(cell)
            elif rule != EXCLUDE:
                value = cell.value if cell.tombstone else self.capture.mask(rule, cell.value)
                cells.append(Cell(plan.columns[cell.column.name], cell.path, value,
                                  cell.timestamp, cell.ttl, cell.local_deletion_time,
                                  cell.tombstone))
        deletions = {name: d for name, d in row.complex_deletions.items()
                     if actions.get(name) != EXCLUDE}
        if (not cells and not deletions and row.liveness is None and row.deletion is None
                and (row.cells or row.complex_deletions)):
            return None
        return Row(row.clustering, row.liveness, row.deletion, row.shadowable, cells,
                   deletions, row.is_static)
