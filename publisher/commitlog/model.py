"""Decoded commit log structures. Values stay raw bytes; shared.codec turns them into Python.

Plain __slots__ classes rather than dataclasses: the decoder builds millions of these and
keyword-argument construction is measurably slower.
"""

from __future__ import annotations

from collections.abc import Mapping

from shared.schema import ColumnSchema, TableSchema

# ClusteringPrefix.Kind ordinals (range tombstone bound kinds).
EXCL_END_BOUND = 0
INCL_START_BOUND = 1
EXCL_END_INCL_START_BOUNDARY = 2
INCL_END_EXCL_START_BOUNDARY = 5
INCL_END_BOUND = 6
EXCL_START_BOUND = 7
BOUND_KIND_NAMES = {
    0: "EXCL_END_BOUND", 1: "INCL_START_BOUND", 2: "EXCL_END_INCL_START_BOUNDARY",
    5: "INCL_END_EXCL_START_BOUNDARY", 6: "INCL_END_BOUND", 7: "EXCL_START_BOUND",
}


class DeletionTime:
    """A tombstone: data with timestamp <= marked_for_delete_at is deleted."""

    __slots__ = ("local_deletion_time", "marked_for_delete_at")

    def __init__(self, marked_for_delete_at: int, local_deletion_time: int | None) -> None:
        self.marked_for_delete_at = marked_for_delete_at
        self.local_deletion_time = local_deletion_time

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, DeletionTime)
                and self.marked_for_delete_at == other.marked_for_delete_at
                and self.local_deletion_time == other.local_deletion_time)

    def __hash__(self) -> int:
        return hash((self.marked_for_delete_at, self.local_deletion_time))

    def __repr__(self) -> str:
        return f"DeletionTime({self.marked_for_delete_at}, {self.local_deletion_time})"


class Liveness:
    """A row's primary key liveness (the INSERT row marker), maybe expiring."""

    __slots__ = ("local_expiration_time", "timestamp", "ttl")

    def __init__(self, timestamp: int, ttl: int, local_expiration_time: int | None) -> None:
        self.timestamp = timestamp
        self.ttl = ttl  # 0 = not expiring
        self.local_expiration_time = local_expiration_time

    def __repr__(self) -> str:
        return f"Liveness({self.timestamp}, ttl={self.ttl}, exp={self.local_expiration_time})"


class Cell:
    """One cell; `path` is set for elements of non-frozen collections and UDT fields."""

    __slots__ = ("column", "local_deletion_time", "path", "timestamp", "tombstone", "ttl",
                 "value")

    def __init__(self, column: ColumnSchema, path: bytes | None, value: bytes, timestamp: int,
                 ttl: int, local_deletion_time: int | None, tombstone: bool) -> None:
        self.column = column
        self.path = path
        self.value = value
        self.timestamp = timestamp
        self.ttl = ttl  # 0 = not expiring
        self.local_deletion_time = local_deletion_time  # tombstone time or expiry time
        self.tombstone = tombstone

    def __repr__(self) -> str:
        path = f"[{self.path.hex()}]" if self.path is not None else ""
        kind = " tombstone" if self.tombstone else (f" ttl={self.ttl}" if self.ttl else "")
        return f"Cell({self.column.name}{path}={self.value.hex()} @{self.timestamp}{kind})"


class Row:
    """A clustering row (or the static row) of one partition update."""

    __slots__ = ("cells", "clustering", "complex_deletions", "deletion", "is_static",
                 "liveness", "shadowable")

    def __init__(self, clustering: tuple[bytes | None, ...], liveness: Liveness | None,
                 deletion: DeletionTime | None, shadowable: bool, cells: list[Cell],
                 complex_deletions: Mapping[str, DeletionTime], is_static: bool) -> None:
        self.clustering = clustering
        self.liveness = liveness
        self.deletion = deletion
        self.shadowable = shadowable
        self.cells = cells
        self.complex_deletions = complex_deletions
        self.is_static = is_static

    def __repr__(self) -> str:
        return (f"Row({'static' if self.is_static else self.clustering}, {self.liveness}, "
                f"del={self.deletion}, {self.cells}, cdel={self.complex_deletions})")


class RangeTombstoneMarker:
    """One bound (open or close) or boundary (close one range, open the next)."""

    __slots__ = ("end_deletion", "kind", "start_deletion", "values")

    def __init__(self, kind: int, values: tuple[bytes | None, ...],
                 end_deletion: DeletionTime | None, start_deletion: DeletionTime | None) -> None:
        self.kind = kind
        self.values = values
        self.end_deletion = end_deletion  # set on closing bounds and boundaries
        self.start_deletion = start_deletion  # set on opening bounds and boundaries

    @property
    def kind_name(self) -> str:
        """Cassandra's ClusteringPrefix.Kind name."""
        return BOUND_KIND_NAMES.get(self.kind, str(self.kind))

    def __repr__(self) -> str:
        return (f"Marker({self.kind_name}, {self.values}, end={self.end_deletion}, "
                f"start={self.start_deletion})")


class PartitionUpdate:
    """Everything one mutation does to one partition of one table."""

    __slots__ = ("markers", "partition_deletion", "partition_key", "rows", "static_row",
                 "table", "unfiltered")

    def __init__(self, table: TableSchema, partition_key: bytes,
                 partition_deletion: DeletionTime | None, static_row: Row | None,
                 rows: list[Row], markers: list[RangeTombstoneMarker],
                 unfiltered: list[Row | RangeTombstoneMarker] | None = None) -> None:
        self.table = table
        self.partition_key = partition_key
        self.partition_deletion = partition_deletion
        self.static_row = static_row
        self.rows = rows
        self.markers = markers
        # rows and markers interleaved in clustering order (only kept when there are markers)
        self.unfiltered = unfiltered if unfiltered is not None else rows


class Mutation:
    """One commit log entry: updates of one partition key across tables of one keyspace."""

    __slots__ = ("keyspace", "partition_key", "position", "segment_id", "start", "updates")

    def __init__(self, keyspace: str, partition_key: bytes, updates: list[PartitionUpdate],
                 segment_id: int = 0, start: int = 0, position: int = 0) -> None:
        self.keyspace = keyspace
        self.partition_key = partition_key
        self.updates = updates
        self.segment_id = segment_id
        self.start = start
        self.position = position
