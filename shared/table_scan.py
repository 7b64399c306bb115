"""A paced scan of one Cassandra table by token range: what `casscade snapshot` and
`casscade verify` both read.

The Murmur3 ring is cut into contiguous (start, end] ranges; each range is one prepared
SELECT (every column, with WRITETIME and TTL of each non-key one), paged by the driver at
`fetch_size` rows, at a chosen consistency, and at most `rate` rows a second on average (a
scan of a production table stays gentle). A progress report goes out at most once a second.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from shared.cql import python_row_decoder
from shared.schema import TableSchema

MIN_TOKEN, MAX_TOKEN = -(2**63), 2**63 - 1


def token_ranges(splits: int) -> list[tuple[int, int]]:
    """`splits` contiguous (start, end] ranges covering the whole Murmur3 ring."""
    if splits < 1:
        raise ValueError("splits must be at least 1")
    width = (MAX_TOKEN - MIN_TOKEN) // splits
    bounds = [MIN_TOKEN + i * width for i in range(splits)] + [MAX_TOKEN]
    return list(itertools.pairwise(bounds))


def select_statement(table: TableSchema) -> str:
    """The per-token-range SELECT: every column, WRITETIME and TTL of each non-key one."""
    key = [c.name for c in (*table.partition_key, *table.clustering)]
    cols = [c for c in table.columns if c.kind in ("regular", "static")]
    exprs = [_q(n) for n in key]
    for c in cols:
        exprs.append(_q(c.name))
        if c.type.name != "counter":  # Cassandra refuses WRITETIME/TTL of counters
            exprs += [f"WRITETIME({_q(c.name)})", f"TTL({_q(c.name)})"]
    pk = ", ".join(_q(c.name) for c in table.partition_key)
    return (f"SELECT {', '.join(exprs)} FROM {_q(table.keyspace)}.{_q(table.table)} "
            f"WHERE token({pk}) > ? AND token({pk}) <= ?")


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


@dataclass
class ScanProgress:
    """How far a scan is (for the progress line)."""

    ranges_total: int
    ranges_done: int = 0
    rows: int = 0
    started: float = field(default_factory=time.monotonic)
    resumed_with: int = 0  # ranges already done by an earlier run

    def line(self) -> str:
        """rows, ranges, rate and ETA in one line."""
        elapsed = max(time.monotonic() - self.started, 1e-6)
        rate = self.rows / elapsed
        left = self.ranges_total - self.ranges_done
        this_run = self.ranges_done - self.resumed_with
        eta = (elapsed / this_run * left) if this_run else float("nan")
        return (f"rows {self.rows:,}  ranges {self.ranges_done}/{self.ranges_total}  "
                f"{rate:,.0f} rows/s  ETA {eta:,.0f} s")


class Pacer:
    """At most `rate` rows a second (0: no limit), on average since `started`: its owner
    decides when the clock starts (a run's start, or a reader's creation)."""

    def __init__(self, rate: float, started: float | None = None) -> None:
        self.rate = rate
        self.started = time.monotonic() if started is None else started
        self.rows = 0

    def tick(self) -> None:
        """Count one row; sleep while the rows so far are ahead of the rate."""
        self.rows += 1
        if self.rate > 0:
            ahead = self.rows / self.rate - (time.monotonic() - self.started)
            if ahead > 0:
                time.sleep(ahead)


def _no_report(_progress: ScanProgress) -> None:
    pass


class TableScan:
    """The prepared per-range SELECT of one table (`table`: its schema in Cassandra)."""

    def __init__(self, session: Any, table: TableSchema, consistency: str, fetch_size: int,
                 wait_after_row: bool = False) -> None:
        from cassandra import ConsistencyLevel

        self.session = session
        # True: a row's wait comes after its reader handled it, so the handling (the
        # snapshot's produce) is inside the row's share of time; False: before it is
        # handed over
        self.wait_after_row = wait_after_row
        self.statement = session.prepare(select_statement(table))
        self.statement.consistency_level = ConsistencyLevel.name_to_value[consistency.upper()]
        self.statement.fetch_size = fetch_size

    def ranges(self, ranges: Sequence[tuple[int, int]], progress: ScanProgress, pacer: Pacer,
               report: Callable[[ScanProgress], None] = _no_report,
               skip: Collection[int] = ()) -> Iterator[tuple[int, Iterator[tuple]]]:
        """(index, rows) of each range of `ranges` whose index is not in `skip`; a range
        counts as done once its rows are read and the caller asks for the next one (so
        whatever the caller does after its rows, it does first). `report`: the progress, at
        most once a second while rows come (the caller reports the last one)."""
        last = [0.0]  # when `report` was last called, across ranges
        with python_row_decoder(self.session):
            for index, (start, end) in enumerate(ranges):
                if index in skip:
                    continue
                yield index, self._rows(start, end, progress, pacer, report, last)
                progress.ranges_done += 1

    def _rows(self, start: int, end: int, progress: ScanProgress, pacer: Pacer,
              report: Callable[[ScanProgress], None], last: list[float]) -> Iterator[tuple]:
        """The rows of one (start, end] range, paced, as plain tuples."""
        for row in self.session.execute(self.statement, (start, end)):
            if not self.wait_after_row:
                pacer.tick()
            progress.rows += 1
            yield tuple(row)
            if self.wait_after_row:
                pacer.tick()
            if time.monotonic() - last[0] > 1:
                report(progress)
                last[0] = time.monotonic()
