"""PySpark's Python worker daemon (`spark.python.daemon.module`), without the tracebacks its
reused workers print when the JVM goes away under them.

When the driver stops Spark after a clean stop, the JVM closes the sockets of the Python
workers it keeps for reuse; a worker waiting there for its next task fails to flush, and
PySpark's daemon prints `BrokenPipeError` with a traceback for it: the worker's end, not
an error. This module runs PySpark's own daemon with that one traceback left out (any
other still prints). It patches `traceback.print_exc` in the daemon's process only, which
is why it is a compatibility module of its own (`materializer.spark.pyspark_internals` has
the driver's); `tests/unit/materializer/spark/test_pyspark_internals.py` fails when
PySpark's daemon no longer prints that way.
"""

from __future__ import annotations

import sys
import traceback
from typing import Any

_print_exc = traceback.print_exc


def print_exc_unless_gone(*args: Any, **kwargs: Any) -> None:
    """traceback.print_exc, silent for a socket the JVM closed (its worker's end)."""
    if isinstance(sys.exc_info()[1], BrokenPipeError | ConnectionResetError):
        return
    _print_exc(*args, **kwargs)


if __name__ == "__main__":
    from pyspark import daemon

    traceback.print_exc = print_exc_unless_gone
    daemon.manager()
