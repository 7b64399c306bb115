"""A clean stop on SIGTERM or Ctrl-C: the query stops after its current micro-batch.

The signal handler only counts (a handler runs between two bytecodes of whatever the main
thread was doing, possibly inside a py4j call: calling into the JVM from there corrupts
that call). The loop that waits for the query looks at the count, every 50 ms once asked.

Spark has no "stop after this micro-batch": `query.stop()` cancels the batch running
then, and that batch runs again at the next start (the events it had written already
would then be written twice). So the stop waits for the batch running when it was asked
to commit, and stops the query at once after: between batches when the job keeps up,
and otherwise a few milliseconds into the next one, before its tasks have read their
records, let alone written an event.
"""

from __future__ import annotations

import logging
import signal
from collections.abc import Callable
from typing import Any

log = logging.getLogger("casscade.materializer")


class StopRequest:
    """SIGTERM/SIGINT: stop after the current micro-batch; a second one: stop at once (the
    micro-batch then runs again at the next start, so nothing is lost either way)."""

    def __init__(self) -> None:
        self.signals = 0
        self._announced = False
        self._running: int | None = None  # the batch that ran when the stop was asked

    def install(self) -> None:
        """Handle SIGTERM and SIGINT here (again after PySpark set its own SIGINT handler)."""
        signal.signal(signal.SIGTERM, self._on_signal)
        signal.signal(signal.SIGINT, self._on_signal)

    def _on_signal(self, _signum: int, _frame: Any) -> None:
        self.signals += 1

    @property
    def requested(self) -> bool:
        """Whether a stop was asked for."""
        return self.signals > 0

    def stop_between_batches(self, query: Any, quiet: Callable[[], None]) -> None:
        """Stop `query` if a stop was asked for and no micro-batch is running (or a second
        signal came); `quiet` first turns Spark's log down (a stop makes it warn of the
        jobs it had nothing to cancel for)."""
        if not self.signals:
            return
        if not self._announced:
            self._announced = True
            self._running = last_batch(query)
            log.info("stopping after the current micro-batch (a second SIGTERM or Ctrl-C "
                     "stops at once)")
        if (self.signals > 1 or not query.status.get("isTriggerActive", False)
                or last_batch(query) != self._running):
            quiet()
            query.stop()


def last_batch(query: Any) -> int | None:
    """The id of the query's last completed micro-batch (None: none yet)."""
    progress = query.lastProgress
    return None if progress is None else progress["batchId"]
