"""Small files under a checkpoint location: what reading and writing them means, and the
local kind (no Spark).

The driver keeps a few records beside Spark's own (`materializer.checkpoint.records`). On
a cluster the checkpoint is often a URI only Spark's Hadoop file systems reach
(`materializer.spark.hadoop_files`); a local path is read with Python's own file calls.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol


def is_uri(location: str | Path) -> bool:
    """Whether a checkpoint location names a file system (scheme://...), not a local path."""
    return "://" in str(location)


class CheckpointFileError(Exception):
    """A checkpoint file could not be read or written (its path and the file system's
    reason)."""


class Files(Protocol):
    """Read and write small text files under one checkpoint location."""

    location: str

    def exists(self, relative: str) -> bool:
        """Whether the file or directory `relative` exists."""
        ...

    def read_text(self, relative: str) -> str | None:
        """The text of file `relative`, None if it does not exist."""
        ...

    def write_text(self, relative: str, text: str) -> None:
        """Write file `relative` whole (its directories made)."""
        ...

    def names(self, relative: str) -> list[str]:
        """The names in directory `relative`, sorted ([] if it does not exist)."""
        ...

    def delete(self, relative: str) -> None:
        """Remove file `relative` (nothing if it does not exist)."""
        ...


class LocalFiles:
    """Files under a local checkpoint directory."""

    def __init__(self, location: str | Path) -> None:
        self.location = str(location)
        self._root = Path(location)

    def exists(self, relative: str) -> bool:
        """Whether the file or directory `relative` exists."""
        return (self._root / relative).exists()

    def read_text(self, relative: str) -> str | None:
        """The text of file `relative`, None if it does not exist."""
        path = self._root / relative
        return path.read_text() if path.is_file() else None

    def write_text(self, relative: str, text: str) -> None:
        """Write file `relative` whole: a temporary file renamed over it."""
        path = self._root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text(text)
        tmp.replace(path)
        # Hadoop's local file system (the driver's, for the same directory) keeps a checksum
        # file beside each file it writes and checks it when it reads; without one it reads
        # unchecked, so a file rewritten here takes its stale checksum away
        path.with_name(f".{path.name}.crc").unlink(missing_ok=True)

    def names(self, relative: str) -> list[str]:
        """The names in directory `relative`, sorted ([] if it does not exist)."""
        path = self._root / relative
        return sorted(p.name for p in path.iterdir()) if path.is_dir() else []

    def delete(self, relative: str) -> None:
        """Remove file `relative` (nothing if it does not exist)."""
        (self._root / relative).unlink(missing_ok=True)
