"""Typed commit log errors, each naming the file and the offset where reading stopped."""

from __future__ import annotations


class CommitLogError(Exception):
    """Reading a segment failed at `offset` of `path`; everything before it was good."""

    kind = "commitlog_error"

    def __init__(self, path: str, offset: int, reason: str) -> None:
        self.path = path
        self.offset = offset
        self.reason = reason
        super().__init__(f"{path} at offset {offset}: {reason}")


class CorruptSegmentError(CommitLogError):
    """The bytes are damaged: bad CRC, impossible length, truncated or undecodable data."""

    kind = "corrupt"


class UnsupportedSegmentError(CommitLogError):
    """A valid segment this reader cannot handle (encrypted, unknown version or compressor)."""

    kind = "unsupported"


class UnknownTableError(CommitLogError):
    """A mutation names a table id the schema does not know: refresh the schema and retry."""

    kind = "unknown_table"

    def __init__(self, path: str, offset: int, table_id: str) -> None:
        self.table_id = table_id
        super().__init__(path, offset, f"unknown table id {table_id}")


class UnknownColumnError(CommitLogError):
    """A partition update names a column its table (and its dropped columns) lacks."""

    kind = "unknown_column"


class UnsupportedTypeError(CommitLogError):
    """A column's CQL type has no decoding rule here (e.g. a custom Java type)."""

    kind = "unsupported_type"


class DecodeError(Exception):
    """Raised inside the pure mutation decoder; the reader adds file and offset."""

    def __init__(self, reason: str, error_class: type[CommitLogError] = CorruptSegmentError,
                 table_id: str | None = None) -> None:
        self.reason = reason
        self.error_class = error_class
        self.table_id = table_id
        super().__init__(reason)
