"""Cassandra's rows against the stream's latest image of each key (pure: no I/O).

A key is EQUAL when the stream's last event for it shows what `SELECT` shows (a key the
stream deleted and Cassandra does not have is equal too). A key whose newest write in
Cassandra is newer than the stream's position is PENDING: its change is still on its way,
and the caller checks it again after a grace period. Otherwise a key Cassandra has and the
stream does not is MISSING, one the stream has and Cassandra does not is EXTRA, and one
both have with other values is DIFFERENT. A recent delete leaves no write time to see, so
an EXTRA key is only final once a recheck finds it again.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any

EQUAL, PENDING, MISSING, EXTRA, DIFFERENT = "equal", "pending", "missing", "extra", "different"
VERDICTS = (EQUAL, PENDING, MISSING, EXTRA, DIFFERENT)
MISMATCHES = (MISSING, EXTRA, DIFFERENT)


@dataclass(frozen=True)
class TableRow:
    """A row as `SELECT` shows it, in the events' form, and its newest write time (µs)."""

    row: dict[str, Any]
    newest_write_us: int


@dataclass(frozen=True)
class Difference:
    """One key the stream and the table disagree on, with both sides."""

    key: Hashable
    verdict: str
    table: dict[str, Any] | None
    stream: dict[str, Any] | None


@dataclass
class Report:
    """The counts per verdict and the first differences, with both sides."""

    keep: int = 10  # differences kept with both sides (the rest are counted only)
    counts: Counter[str] = field(default_factory=Counter)
    differences: list[Difference] = field(default_factory=list)
    pending: list[Hashable] = field(default_factory=list)  # to check again

    def add(self, key: Hashable, verdict: str, table: dict[str, Any] | None,
            stream: dict[str, Any] | None) -> None:
        """Count one key's verdict; keep its sides if it is one of the first mismatches."""
        self.counts[verdict] += 1
        if verdict == PENDING:
            self.pending.append(key)
        elif verdict in MISMATCHES and len(self.differences) < self.keep:
            self.differences.append(Difference(key, verdict, table, stream))

    @property
    def mismatched(self) -> int:
        """Keys missing, extra or different."""
        return sum(self.counts[v] for v in MISMATCHES)


def verdict(table: TableRow | None, stream: dict[str, Any] | None, position_us: int) -> str:
    """One key's verdict: its row in Cassandra (None: no row), the stream's last image
    (None: deleted, or never seen) and the newest write time the stream has reached."""
    if table is None:
        return EQUAL if stream is None else EXTRA
    if stream == table.row:
        return EQUAL
    if table.newest_write_us > position_us:
        return PENDING
    return MISSING if stream is None else DIFFERENT
