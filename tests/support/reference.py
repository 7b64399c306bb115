"""A deliberately plain reference evaluation of decoded mutations (test code only).

Folds a table's decoded partition updates the way a single Cassandra node would, and renders
what `SELECT col, WRITETIME(col), TTL(col)` returns, in the JSON form of shared.jsonvalues,
so a test can compare the decoder's view with Cassandra's own answer. TTLs are assumed not to
have expired (the workloads use long ones).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from publisher.agent.cdc_index import read_cdc_index
from publisher.commitlog.model import Cell, PartitionUpdate, RangeTombstoneMarker
from publisher.commitlog.reader import CommitLogReader
from shared import codec
from shared.jsonvalues import to_json_value
from shared.schema import TableSchema
from shared.system_schema import read_system_schema

MIN = -(1 << 63)


@dataclass
class _Row:
    liveness_ts: int = MIN
    deletion: int = MIN
    cells: dict[tuple[str, bytes | None], Cell] = field(default_factory=dict)
    complex_deletions: dict[str, int] = field(default_factory=dict)


@dataclass
class _Partition:
    deletion: int = MIN
    static: _Row = field(default_factory=_Row)
    rows: dict[tuple, _Row] = field(default_factory=dict)
    ranges: list[tuple[tuple, bool, tuple, bool, int]] = field(default_factory=list)


def _wins(new: Cell, old: Cell) -> bool:
    # Cells.reconcile: higher timestamp; on a tie a tombstone, then an expiring cell, wins;
    # two tombstones or two expiring cells: the later local deletion time (CASSANDRA-14592);
    # then the greater value.
    if new.timestamp != old.timestamp:
        return new.timestamp > old.timestamp
    if new.tombstone != old.tombstone:
        return new.tombstone
    if bool(new.ttl) != bool(old.ttl):
        return bool(new.ttl)
    if (new.tombstone or new.ttl) and new.local_deletion_time != old.local_deletion_time:
        return (new.local_deletion_time or 0) > (old.local_deletion_time or 0)
    return new.value > old.value


class ReferenceTable:
    """The state of one table after applying partition updates in any order."""

    def __init__(self, table: TableSchema) -> None:
        self.table = table
        self.partitions: dict[bytes, _Partition] = {}

    def apply(self, update: PartitionUpdate) -> None:
        """Merge one decoded partition update."""
        part = self.partitions.setdefault(update.partition_key, _Partition())
        if update.partition_deletion is not None:
            part.deletion = max(part.deletion, update.partition_deletion.marked_for_delete_at)
        if update.static_row is not None:
            self._merge_row(part.static, update.static_row)
        for row in update.rows:
            self._merge_row(part.rows.setdefault(self._ck(row.clustering), _Row()), row)
        opened: RangeTombstoneMarker | None = None
        for m in update.markers:
            if m.end_deletion is not None and opened is not None:
                if any(c.clustering_order == "desc" for c in self.table.clustering):
                    raise NotImplementedError("reference ranges assume ascending clustering")
                part.ranges.append((self._ck(opened.values), opened.kind in (1, 2),
                                    self._ck(m.values), m.kind in (5, 6),
                                    opened.start_deletion.marked_for_delete_at))
                opened = None
            if m.start_deletion is not None:
                opened = m

    def _ck(self, values: Iterable[bytes | None]) -> tuple:
        return tuple(codec.decode_value(c.type, v) if v is not None else None
                     for c, v in zip(self.table.clustering, values, strict=False))

    def _merge_row(self, state: _Row, row: Any) -> None:
        if row.liveness is not None:
            state.liveness_ts = max(state.liveness_ts, row.liveness.timestamp)
        if row.deletion is not None:
            state.deletion = max(state.deletion, row.deletion.marked_for_delete_at)
        for name, d in row.complex_deletions.items():
            state.complex_deletions[name] = max(state.complex_deletions.get(name, MIN),
                                                d.marked_for_delete_at)
        for cell in row.cells:
            key = (cell.column.name, cell.path)
            old = state.cells.get(key)
            if old is None or _wins(cell, old):
                state.cells[key] = cell

    def _range_deletion(self, part: _Partition, ck: tuple) -> int:
        best = MIN
        for start, start_incl, end, end_incl, ts in part.ranges:
            if self._after(ck, start, start_incl) and self._before(ck, end, end_incl):
                best = max(best, ts)
        return best

    @staticmethod
    def _after(ck: tuple, bound: tuple, inclusive: bool) -> bool:
        prefix = ck[:len(bound)]
        return prefix > bound or (inclusive and prefix == bound)

    @staticmethod
    def _before(ck: tuple, bound: tuple, inclusive: bool) -> bool:
        prefix = ck[:len(bound)]
        return prefix < bound or (inclusive and prefix == bound)

    def rows(self, now_s: int) -> list[dict[str, Any]]:
        """What SELECT returns: values, WRITETIME and remaining TTL per column, by row."""
        out = []
        regular = [c for c in self.table.columns if c.kind == "regular"]
        static = [c for c in self.table.columns if c.kind == "static"]
        for key, part in self.partitions.items():
            pk = codec.decode_partition_key(self.table, key)
            static_view = self._view(part.static, static, part.deletion, now_s)
            live_rows = []
            for ck, row in part.rows.items():
                deleted = max(part.deletion, row.deletion, self._range_deletion(part, ck))
                view = self._view(row, regular, deleted, now_s)
                if row.liveness_ts > deleted or view["live"]:
                    live_rows.append((ck, view))
            if not live_rows and static_view["live"]:
                live_rows.append(((None,) * len(self.table.clustering), None))
            for ck, view in live_rows:
                entry = {"values": {}, "writetime": {}, "ttl": {}}
                entry["values"].update({k: to_json_value(v) for k, v in pk.items()})
                for c, v in zip(self.table.clustering, ck, strict=True):
                    entry["values"][c.name] = to_json_value(v)
                for part_view, cols in ((view, regular), (static_view, static)):
                    for c in cols:
                        # Cassandra refuses WRITETIME/TTL of counters.
                        whats = ("values",) if c.type.name == "counter" else (
                            "values", "writetime", "ttl")
                        for what in whats:
                            entry[what][c.name] = part_view[what][c.name] if part_view else None
                out.append(entry)
        return out

    def _view(self, row: _Row, columns: list, deleted: int, now_s: int) -> dict[str, Any]:
        view: dict[str, Any] = {"values": {}, "writetime": {}, "ttl": {}, "live": False}
        for c in columns:
            cutoff = max(deleted, row.complex_deletions.get(c.name, MIN))
            cells = [cell for (name, _), cell in row.cells.items()
                     if name == c.name and cell.timestamp > cutoff and not cell.tombstone]
            if not cells:
                view["values"][c.name] = view["writetime"][c.name] = view["ttl"][c.name] = None
                continue
            view["live"] = True
            if not c.type.is_multicell:
                cell = cells[0]
                view["values"][c.name] = to_json_value(codec.decode_value(c.type, cell.value))
                view["writetime"][c.name] = None if c.type.name == "counter" else cell.timestamp
                view["ttl"][c.name] = _remaining(cell, now_s)
                continue
            cells.sort(key=lambda cell: _element_order(c.type.name, c, cell))
            view["values"][c.name] = _collection(c, cells)
            if c.type.name == "udt":  # one entry per field, null where the field is unset
                by_field = {int.from_bytes(cell.path, "big", signed=True): cell for cell in cells}
                fields = [by_field.get(i) for i in range(len(c.type.field_names))]
                view["writetime"][c.name] = [f.timestamp if f else None for f in fields]
                view["ttl"][c.name] = [_remaining(f, now_s) if f else None for f in fields]
            else:
                view["writetime"][c.name] = [cell.timestamp for cell in cells]
                view["ttl"][c.name] = [_remaining(cell, now_s) for cell in cells]
        return view


def _remaining(cell: Cell, now_s: int) -> int | None:
    return None if not cell.ttl else cell.local_deletion_time - now_s


def _element_order(kind: str, column: Any, cell: Cell) -> Any:
    if kind == "list":
        u = uuid.UUID(bytes=cell.path)
        return (u.time, cell.path)
    if kind == "udt":
        return int.from_bytes(cell.path, "big", signed=True)
    return codec.decode_cell_path(column, cell.path)


def _collection(column: Any, cells: list[Cell]) -> Any:
    kind = column.type.name
    if kind == "list":
        return [to_json_value(codec.decode_cell_value(column, c.path, c.value)) for c in cells]
    if kind == "set":
        return to_json_value({codec.decode_cell_path(column, c.path) for c in cells})
    if kind == "map":
        return [[to_json_value(codec.decode_cell_path(column, c.path)),
                 to_json_value(codec.decode_cell_value(column, c.path, c.value))] for c in cells]
    fields = {codec.decode_cell_path(column, c.path):
              to_json_value(codec.decode_cell_value(column, c.path, c.value)) for c in cells}
    return {name: fields.get(name) for name in column.type.field_names}


def select_rows(session: Any, keyspace: str, table: dict[str, Any],
                skip_times: frozenset[str] = frozenset()) -> list[dict[str, Any]]:
    """`SELECT` every column of a table (JSON schema form) with WRITETIME and TTL of each cell
    (but of the columns in `skip_times`).

    For a non-frozen collection or UDT, Cassandra 5.0 returns a list: one write time or TTL
    per element (or UDT field, null where unset); 4.x refuses them. The session must use the
    pure-Python result decoder (cassandra.protocol._ProtocolHandler): the compiled one
    rejects the null elements those lists contain.
    """
    names = [c["name"] for c in table["columns"]]
    meta = [(fn, c["name"]) for c in table["columns"]
            if c["kind"] in ("regular", "static") and c["type"] != "counter"  # refused
            and c["name"] not in skip_times for fn in ("writetime", "ttl")]
    exprs = names + [f"{fn}({col}) AS {fn}_{col}" for fn, col in meta]
    result = []
    for row in session.execute(f"SELECT {', '.join(exprs)} FROM {keyspace}.{table['table']}"):
        d = row._asdict()
        entry = {"values": {n: to_json_value(d[n]) for n in names}, "writetime": {}, "ttl": {}}
        for fn, col in meta:
            entry[fn][col] = to_json_value(d[f"{fn}_{col}"])
        result.append(entry)
    return result


def diff_rows(table: TableSchema, decoded: list[dict], selected: list[dict]) -> list[str]:
    """Differences between folded decoded rows and SELECT results (TTLs within 1 s)."""
    names = {c.name for c in table.columns}
    selected = [{w: {c: v for c, v in r[w].items() if c in names} for w in r} for r in selected]
    got, exp = _canonical(table, decoded), _canonical(table, selected)
    problems = []
    if len(got) != len(exp):
        problems.append(f"{table.name}: {len(got)} rows decoded, {len(exp)} selected")
    for g, e in zip(got, exp, strict=False):
        if g["values"] != e["values"] or g["writetime"] != e["writetime"]:
            problems.append(f"{table.name}: decoded {json.dumps(g)} != selected {json.dumps(e)}")
        elif not _ttls_close(g["ttl"], e["ttl"]):
            problems.append(f"{table.name}: TTLs {g['ttl']} != {e['ttl']}")
    return problems


def _canonical(table: TableSchema, rows: list[dict]) -> list[dict]:
    """Rows sorted; set/map values and element write times/TTLs made order-free."""
    types = {c.name: c.type for c in table.columns}

    def norm(col: str, what: str, value: Any) -> Any:
        t = types[col]
        if not isinstance(value, list) or t.name == "udt":
            return value
        if what != "values" or (t.name in ("set", "map") and t.is_multicell):
            return sorted(value, key=json.dumps)
        return value

    out = [{w: {c: norm(c, w, v) for c, v in r[w].items()} for w in ("values", "writetime",
                                                                         "ttl")}
           for r in rows]
    return sorted(out, key=lambda r: json.dumps(r["values"], sort_keys=True))


def _ttls_close(got: dict, exp: dict) -> bool:
    def flat(v: Any) -> list:
        return v if isinstance(v, list) else [v]

    for col, e in exp.items():
        g = got.get(col)
        if len(flat(g)) != len(flat(e)):
            return False
        for a, b in zip(flat(g), flat(e), strict=True):
            if (a is None) != (b is None) or (a is not None and abs(a - b) > 1):
                return False
    return True


def cdc_offsets(cdc_raw: Path) -> dict[str, int]:
    """Synced offset of every indexed segment in cdc_raw."""
    return {s.name: idx.offset for s in cdc_raw.glob("CommitLog-*.log")
            if (idx := read_cdc_index(s)) is not None}


def completed_segments(cdc_raw: Path) -> list[Path]:
    """Segments in cdc_raw whose idx says COMPLETED."""
    return [s for s in cdc_raw.glob("CommitLog-*.log")
            if (idx := read_cdc_index(s)) is not None and idx.completed]


def copy_synced_segments(cdc_raw: Path, before: dict[str, int], offsets: dict[str, int],
                         dest: Path) -> list[str]:
    """Copy every segment that grew past `before` into `dest`, each with an idx saying
    COMPLETED at its synced offset (a private cdc_raw for an agent); returns the names."""
    import shutil

    names = []
    for name, offset in offsets.items():
        if offset > before.get(name, 0):
            shutil.copyfile(cdc_raw / name, dest / name)
            (dest / name.replace(".log", "_cdc.idx")).write_text(f"{offset}\nCOMPLETED")
            names.append(name)
    return names


def settled_offsets(cdc_raw: Path, wait_s: float = 2.2, timeout_s: float = 60,
                    allow_empty: bool = False) -> dict[str, int]:
    """cdc_offsets once two reads `wait_s` apart (> two commit log syncs) agree;
    `allow_empty`: no indexed segment counts as settled (a restarted node before its first
    CDC write)."""
    from support.services import wait_until

    def settled() -> tuple[dict[str, int]] | None:
        first = cdc_offsets(cdc_raw)
        time.sleep(wait_s)
        ok = (first or allow_empty) and first == cdc_offsets(cdc_raw)
        return (first,) if ok else None

    return wait_until(settled, timeout_s, f"CDC idx offsets in {cdc_raw} to settle")[0]


def fold_new_cdc(cdc_raw: Path, before: dict[str, int], source: Any,
                 keyspace: str) -> dict[str, ReferenceTable]:
    """Once the idx offsets settle, decode what was synced since `before` and fold the
    updates of `keyspace`'s tables, by table name."""
    offsets = settled_offsets(cdc_raw)
    names = sorted((n for n, off in offsets.items() if off > before.get(n, 0)),
                   key=lambda n: int(n.split("-")[2].split(".")[0]))
    reader = CommitLogReader(source, skip_unknown=True)
    tables: dict[str, ReferenceTable] = {}
    for name in names:
        idx = read_cdc_index(cdc_raw / name)
        until = None if idx is not None and idx.completed else offsets[name]
        for mutation in reader.read(cdc_raw / name, until=until):
            for update in mutation.updates:
                if update.table.keyspace == keyspace:
                    tables.setdefault(update.table.table,
                                      ReferenceTable(update.table)).apply(update)
    return tables


def compare_with_select(session: Any, keyspace: str, tables: dict[str, ReferenceTable],
                        min_rows: int = 1) -> list[str]:
    """diff_rows of every folded table against Cassandra's own SELECT of it."""
    from cassandra.protocol import ProtocolHandler, _ProtocolHandler

    session.client_protocol_handler = _ProtocolHandler  # see select_rows
    try:
        now_s = int(time.time())
        release = session.execute("SELECT release_version FROM system.local").one()
        cell_times = int(release.release_version.split(".")[0]) >= 5  # of collections
        problems = []
        for t in read_system_schema(session)["tables"]:
            if t["keyspace"] != keyspace:
                continue
            folded = tables.get(t["table"])
            skip = frozenset() if cell_times or folded is None else frozenset(
                c.name for c in folded.table.columns if c.type.is_multicell)
            selected = select_rows(session, keyspace, t, skip)
            if len(selected) < min_rows:
                problems.append(f"{t['table']}: only {len(selected)} rows selected")
            if folded is None:
                problems.append(f"{t['table']}: nothing decoded")
                continue
            rows = folded.rows(now_s)
            for row in rows:  # what 4.x cannot select is not compared
                for what in ("writetime", "ttl"):
                    for name in skip:
                        row[what].pop(name, None)
            problems += diff_rows(folded.table, rows, selected)
        return problems
    finally:
        session.client_protocol_handler = ProtocolHandler
