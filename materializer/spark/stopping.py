"""A clean stop on SIGTERM or Ctrl-C: the query stops after its current micro-batch.

The signal handler only counts (a handler runs between two bytecodes of whatever the main
thread was doing, possibly inside a py4j call: calling into the JVM from there corrupts
that call). The loop that waits for the query looks at the count, every 50 ms once asked.

Spark has no "stop after this micro-batch": `query.stop()` cancels the batch running
then, and that batch runs again at the next start (the events it had written already
would then be written twice). So the stop waits for a moment no batch runs (a job that
keeps up waits for its next trigger between batches) and stops the query then. A job
whose batches run back to back (a backlog) has no such moment: after
`spark.stop_timeout_s` it is stopped anyway, and so is a batch that cannot commit (a broker
gone). A stop that Spark does not finish (its Kafka admin client waiting on that broker)
ends with the driver JVM killed: the checkpoint and the stores' changelogs are made for
that.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Callable
from typing import Any

log = logging.getLogger("casscade.materializer")
STOP_HANG_S = 30.0  # after query.stop(): then the driver JVM is killed


class StopHung(Exception):
    """Spark did not stop the query in time."""


class StopRequest:
    """SIGTERM/SIGINT: stop after the current micro-batch (waiting `timeout_s` at most); a
    second one: stop at once (the micro-batch then runs again at the next start, so nothing
    is lost either way)."""

    def __init__(self, timeout_s: float = 45.0) -> None:
        self.timeout_s = timeout_s
        self.signals = 0
        self.hung = False  # Spark did not finish the stop: its JVM is past saving
        self._asked_at: float | None = None
        self._stopping_at: float | None = None
        self._stopper: threading.Thread | None = None

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
        """Stop `query` if a stop was asked for and no micro-batch is running, its time is
        up or a second signal came; `quiet` first turns Spark's log down (a stop makes it
        warn of the jobs it had nothing to cancel for). StopHung when Spark has not stopped
        it STOP_HANG_S after."""
        if not self.signals:
            return
        now = time.monotonic()
        if self._stopping_at is not None:
            if now - self._stopping_at > STOP_HANG_S:
                self.hung = True
                raise StopHung(f"Spark did not stop the query within {STOP_HANG_S:.0f} s")
            return
        if self._asked_at is None:
            self._asked_at = now
            log.info("stopping after the current micro-batch (a second SIGTERM or Ctrl-C "
                     "stops at once)")
        late = now - self._asked_at > self.timeout_s
        if self.signals > 1 or late or not query.status.get("isTriggerActive", False):
            if late:
                log.warning(f"no moment between micro-batches came within "
                            f"{self.timeout_s:.0f} s (spark.stop_timeout_s); stopping the "
                            "one running: it runs again at the next start")
            quiet()
            self._stopping_at = now
            # in a thread of its own: Spark's stop can wait long on a broker that went away
            self._stopper = threading.Thread(target=stop_now, args=(query,), name="stop-query",
                                             daemon=True)
            self._stopper.start()

    def finish(self) -> None:
        """Wait for the query's stop to return (before Spark itself is stopped: a stop still
        talking to a stopped SparkContext fails)."""
        if self._stopper is not None:
            self._stopper.join(STOP_HANG_S)


def stop_now(query: Any) -> None:
    """Stop `query` at once (its running micro-batch runs again at the next start)."""
    try:
        query.stop()
    except Exception as exc:  # noqa: BLE001 — py4j's errors: the query ended meanwhile
        log.debug("the query's stop: %s", exc)

