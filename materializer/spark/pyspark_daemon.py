"""PySpark's Python worker daemon (`spark.python.daemon.module`): PySpark's own, with two
changes to the workers it forks. Both reach PySpark internals, which is why this is a
compatibility module of its own (`materializer.spark.pyspark_internals` has the driver's);
`tests/unit/materializer/spark/test_pyspark_internals.py` fails when PySpark no longer
works the way they rely on.

1. **A task knows whether it got its whole input** (`input_whole`). The JVM sends a task's
   rows to its Python worker as an Arrow stream and ends it with Arrow's end-of-stream
   marker once its input iterator (for the Kafka source: every topic partition of the task
   read to the micro-batch's planned end offset) is exhausted. When that iterator fails
   instead (the task killed without an interrupt because a sibling task failed and the
   stage was aborted, a Kafka fetch that failed on the executor), the JVM shuts down its
   side of the socket without the marker, and pyarrow ends the stream there as if it were
   whole: the task would merge, and commit, part of its partition's batch. The workers read
   their Arrow input through a watch that records whether the stream ended at the marker;
   a task that did not get it fails instead of committing (`materializer.spark.
   partition_job`).
2. **No traceback for a worker the JVM left.** When the driver stops Spark after a clean
   stop, the JVM closes the sockets of the Python workers it keeps for reuse; a worker
   waiting there for its next task fails to flush, and PySpark's daemon prints
   `BrokenPipeError` with a traceback for it: the worker's end, not an error. The daemon
   runs with that one traceback left out (any other still prints).

Beside them, and reaching nothing of PySpark's: the daemon loads the merge's modules,
pyarrow and pandas before it forks its first worker (`materializer.spark.warm_workers.
preload`), so every worker starts with them.
"""

from __future__ import annotations

import io
import sys
import traceback
from collections.abc import Iterator
from typing import IO, Any

_print_exc = traceback.print_exc


def print_exc_unless_gone(*args: Any, **kwargs: Any) -> None:
    """traceback.print_exc, silent for a socket the JVM closed (its worker's end)."""
    if isinstance(sys.exc_info()[1], BrokenPipeError | ConnectionResetError):
        return
    _print_exc(*args, **kwargs)


class InputCut(Exception):
    """A task's Arrow input ended without the JVM's end-of-stream marker: the task did not
    get all its rows, so it must not commit what it read."""


class _WatchedInput(io.RawIOBase):
    """A worker's input as pyarrow reads an Arrow stream from it: whether the stream ended
    at its end marker (the last read got every byte asked for: pyarrow reads the marker's
    8 bytes in full, and at a cut stream its last read gets none)."""

    def __init__(self, stream: IO[bytes]) -> None:
        super().__init__()
        self._stream = stream
        self.last_read_short = False

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        data = self._stream.read(size)
        self.last_read_short = size is not None and size > 0 and len(data) < size
        return data


# this worker's last Arrow input: None before any (or without the watch), else whether it
# ended at the JVM's end marker (a worker runs one task at a time)
_last_input: list[bool | None] = [None]


def watch_arrow_input() -> None:
    """Make this process's (and its forks') PySpark workers read Arrow input through the
    watch that `input_whole` reads."""
    from pyspark.sql.pandas.serializers import ArrowStreamSerializer

    original = ArrowStreamSerializer.load_stream
    if getattr(original, "_casscade_watch", False):
        return

    def load_stream(self: Any, stream: IO[bytes]) -> Iterator[Any]:
        watched = _WatchedInput(stream)
        _last_input[0] = False
        yield from original(self, watched)
        _last_input[0] = not watched.last_read_short

    load_stream._casscade_watch = True  # type: ignore[attr-defined]
    ArrowStreamSerializer.load_stream = load_stream  # type: ignore[method-assign]


def input_whole() -> None:
    """After a task has read its input to the end: raise InputCut unless the stream ended
    at the JVM's end marker (or if the worker did not watch it: it cannot tell)."""
    whole = _last_input[0]
    if whole is None:
        raise InputCut("this Python worker cannot tell whether its task got all its input "
                       "(spark.python.daemon.module must be materializer.spark."
                       "pyspark_daemon, with spark.python.use.daemon true): nothing of the "
                       "task is committed")
    if not whole:
        raise InputCut("the task's input ended before the JVM's end-of-stream marker (the "
                       "task was stopped while it read, or its Kafka read failed): nothing "
                       "of the task is committed, and the micro-batch runs again")


if __name__ == "__main__":
    from pyspark import daemon

    from materializer.spark import pyspark_daemon  # the module the workers' tasks import
    from materializer.spark.warm_workers import preload

    pyspark_daemon.watch_arrow_input()
    preload()  # every worker forked from here starts with the merge loaded
    traceback.print_exc = print_exc_unless_gone
    daemon.manager()
