"""The table's side: each row as `SELECT` shows it, in the events' form, with its newest
write time.

Rows are read by token range (`shared.table_scan`, the snapshot's scan: every column with
its WRITETIME), paged, at the chosen consistency (ALL by default: every replica's latest
write) and at most `rate` rows a second, so a scan of a production table stays gentle. A
row is rendered as the stream renders it: the events' value modes, and the publisher's
capture rules (an excluded column left out, a masked one hashed or starred from its
serialized value).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

from casscade.verify.compare import TableRow
from casscade.verify.keys import token_of
from casscade.verify.stream_images import key_text
from materializer.output.envelope import dumps
from materializer.output.values import ValueModes, to_connect
from shared import codec
from shared.capture import EXCLUDE, KEEP, Capture
from shared.schema import TableSchema
from shared.table_scan import Pacer, ScanProgress, TableScan


class TableRows:
    """Reads one table's rows (`table`: its schema in Cassandra)."""

    def __init__(self, session: Any, table: TableSchema, modes: ValueModes,
                 capture: Capture | None = None, consistency: str = "ALL",
                 rate: float = 0.0, skip_static_only: bool = False,
                 fetch_size: int = 1000) -> None:
        self.table = table
        self.modes = modes
        self.capture = capture
        self.actions = capture.actions(table) if capture is not None else {}
        self.skip_static_only = skip_static_only and bool(table.clustering)
        self._scan = TableScan(session, table, consistency, fetch_size)
        # one rate across every scan of this table (the first one and the rechecks)
        self._pacer = Pacer(rate)

    def scan(self, ranges: list[tuple[int, int]], progress: ScanProgress | None = None,
             report: Callable[[ScanProgress], None] = lambda _p: None
             ) -> Iterator[tuple[str, dict[str, Any], TableRow, int]]:
        """(key text, key, row, token) of every row in the (start, end] token `ranges`."""
        progress = progress or ScanProgress(len(ranges))
        for _index, rows in self._scan.ranges(ranges, progress, self._pacer, report):
            for row in rows:
                item = self._render(row)
                if item is not None:
                    yield item
        report(progress)

    def _render(self, row: tuple) -> tuple[str, dict[str, Any], TableRow, int] | None:
        values = iter(row)
        t = self.table
        pk = [next(values) for _ in t.partition_key]
        ck = [next(values) for _ in t.clustering]
        if self.skip_static_only and any(v is None for v in ck):
            return None
        typed: dict[str, Any] = {}
        for c, v in zip((*t.partition_key, *t.clustering), (*pk, *ck), strict=True):
            typed[c.name] = to_connect(c.type, v, self.modes)
        newest = 0
        for c in t.columns:
            if c.kind not in ("regular", "static"):
                continue
            value = next(values)
            if c.type.name != "counter":
                newest = max(newest, _newest(next(values)))
                next(values)  # its TTL
            rule = self.actions.get(c.name, KEEP)
            if rule == EXCLUDE:
                continue
            if rule == KEEP or value is None:
                typed[c.name] = to_connect(c.type, value, self.modes)
            else:
                assert self.capture is not None
                typed[c.name] = self.capture.mask(
                    rule, codec.encode_value(c.type, value)).decode()
        # through the events' own JSON (bytes as base64, tuples as lists)
        typed = json.loads(dumps(typed))
        key = {c.name: typed[c.name] for c in (*t.partition_key, *t.clustering)}
        return key_text(key), key, TableRow(typed, newest), token_of(t, pk)


def _newest(writetime: Any) -> int:
    """The newest of a WRITETIME result (a number, or a list of them for a collection)."""
    if writetime is None:
        return 0
    if isinstance(writetime, list):
        return max((w for w in writetime if w is not None), default=0)
    return int(writetime)
