"""Checkpoint files through the Hadoop file system Spark writes the checkpoint to (hdfs://,
s3a://, file://, ...).

The driver keeps a few records beside Spark's own (`materializer.checkpoint.records`). On a
cluster the checkpoint is a URI only Spark's Hadoop file systems can reach, with the
user's credentials and settings already in Spark's Hadoop configuration, and even a plain
path means what the cluster's default file system (`fs.defaultFS`) makes of it. So with a
Spark session every location is read and written through the driver JVM's Hadoop
`FileSystem`, resolved exactly as Spark resolves the checkpoint
(`materializer.spark.pyspark_internals`); the commands that run without Spark use
`materializer.checkpoint.files.LocalFiles` on a local path.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from materializer.checkpoint.files import CheckpointFileError, Files, LocalFiles, is_uri
from materializer.spark import pyspark_internals

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


class HadoopFiles:
    """Files under a checkpoint URI, through the driver JVM's Hadoop file systems."""

    def __init__(self, spark: SparkSession, location: str) -> None:
        self.location = location.rstrip("/")
        self._java, self._conf = pyspark_internals.hadoop(spark)

    def _path(self, relative: str) -> tuple[Any, Any]:
        path = self._java.org.apache.hadoop.fs.Path(f"{self.location}/{relative}")
        return path, path.getFileSystem(self._conf)

    @contextmanager
    def _errors(self, relative: str, doing: str) -> Iterator[None]:
        """A Java exception as a CheckpointFileError naming the file, not a py4j trace."""
        from py4j.protocol import Py4JJavaError

        try:
            yield
        except Py4JJavaError as exc:
            # a NameNode's refusal carries the server's stack trace in its message: the
            # first line says what and why (e.g. "Permission denied: user=..., access=WRITE")
            reason = str(exc.java_exception.toString()).splitlines()[0]
            raise CheckpointFileError(f"checkpoint file {self.location}/{relative}: {doing} "
                                      f"failed: {reason}") from None

    def is_local(self) -> bool:
        """Whether the location is on this machine's file system (Hadoop's `file` scheme)."""
        with self._errors("", "resolving its file system"):
            _path, fs = self._path("")
            return str(fs.getScheme()) == "file"

    def exists(self, relative: str) -> bool:
        """Whether the file or directory `relative` exists."""
        with self._errors(relative, "looking it up"):
            path, fs = self._path(relative)
            return bool(fs.exists(path))

    def read_text(self, relative: str) -> str | None:
        """The text of file `relative`, None if it does not exist."""
        with self._errors(relative, "reading"):
            path, fs = self._path(relative)
            if not fs.exists(path):
                return None
            stream = fs.open(path)
            try:
                return bytes(self._java.org.apache.commons.io.IOUtils.toByteArray(stream)
                             ).decode()
            finally:
                stream.close()

    def write_text(self, relative: str, text: str) -> None:
        """Write file `relative` whole (overwritten; object stores have no rename that is
        atomic, and a reader of these records only ever runs after the writer has ended)."""
        with self._errors(relative, "writing"):
            path, fs = self._path(relative)
            stream = fs.create(path, True)
            try:
                stream.write(bytearray(text.encode()))
            finally:
                stream.close()

    def names(self, relative: str) -> list[str]:
        """The names in directory `relative`, sorted ([] if it does not exist)."""
        with self._errors(relative, "listing it"):
            path, fs = self._path(relative)
            if not fs.exists(path):
                return []
            return sorted(str(st.getPath().getName()) for st in fs.listStatus(path))


    def delete(self, relative: str) -> None:
        """Remove file `relative` (nothing if it does not exist)."""
        with self._errors(relative, "deleting it"):
            path, fs = self._path(relative)
            if fs.exists(path):
                fs.delete(path, False)


def files(spark: SparkSession | None, location: str | Path) -> Files:
    """The files under `location`: through Spark's Hadoop file systems when there is a
    session, else a local path directly (a URI without a session: ValueError)."""
    if spark is not None:
        return HadoopFiles(spark, str(location))
    if is_uri(location):
        raise ValueError(f"checkpoint {location}: a file system URI is read through Spark, "
                         "and this command runs without it: give a local path")
    return LocalFiles(location)
